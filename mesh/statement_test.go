package mesh

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

func signedStatement(t *testing.T, kp nkeys.KeyPair, at time.Time) *ApprovalStatement {
	t.Helper()
	st := &ApprovalStatement{ApprovalID: "ap-1", CallID: "ap-1", Server: "resources", Tool: "resources_add",
		ArgsHash: "sha256:00", Decision: ApprovalApproved, By: "alice", At: at.UTC().Format(time.RFC3339Nano)}
	if err := st.Sign(kp); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStatementSigningInput(t *testing.T) {
	st := ApprovalStatement{Type: StatementType, ApprovalID: "a", CallID: "c", Server: "s", Tool: "t<>", ArgsHash: "sha256:00",
		Decision: ApprovalApproved, By: "b", At: "2026-01-02T03:04:05.000000006Z", Key: "OK", Sig: "ignored"}
	got, err := st.SigningInput()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"approval_id":"a","args_hash":"sha256:00","at":"2026-01-02T03:04:05.000000006Z","by":"b","call_id":"c","decision":"approved","key":"OK","server":"s","tool":"t<>","type":"agentmesh.approval.v1"}`
	if string(got) != want {
		t.Errorf("signing input\n got %s\nwant %s", got, want)
	}
}

func TestStatementSignAndVerify(t *testing.T) {
	kp, _ := nkeys.CreateOperator()
	other, _ := nkeys.CreateOperator()
	trusted, err := NewKeySet(pubKey(kp))
	if err != nil {
		t.Fatal(err)
	}
	st := signedStatement(t, kp, time.Now())
	if st.Type != StatementType || st.Key != pubKey(kp) || st.Sig == "" {
		t.Fatalf("signed = %+v", st)
	}
	if err := st.Verify(trusted); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// Any field changed after signing breaks the signature.
	for name, edit := range map[string]func(*ApprovalStatement){
		"approval":  func(s *ApprovalStatement) { s.ApprovalID = "ap-2" },
		"call":      func(s *ApprovalStatement) { s.CallID = "c-2" },
		"server":    func(s *ApprovalStatement) { s.Server = "files" },
		"tool":      func(s *ApprovalStatement) { s.Tool = "resources_remove" },
		"arguments": func(s *ApprovalStatement) { s.ArgsHash = "sha256:01" },
		"decision":  func(s *ApprovalStatement) { s.Decision = ApprovalRejected },
		"by":        func(s *ApprovalStatement) { s.By = "mallory" },
		"at":        func(s *ApprovalStatement) { s.At = time.Now().UTC().Format(time.RFC3339Nano) },
		// The first character carries six bits of the signature: another
		// one always changes it.
		"signature": func(s *ApprovalStatement) {
			first := "A"
			if s.Sig[0] == 'A' {
				first = "B"
			}
			s.Sig = first + s.Sig[1:]
		},
		// The last character of 64 bytes carries two bits and four of
		// padding: the same signature spelt with padding bits set.
		"padding bits": func(s *ApprovalStatement) { s.Sig = s.Sig[:len(s.Sig)-1] + string(s.Sig[len(s.Sig)-1]+1) },
		"garbage":      func(s *ApprovalStatement) { s.Sig = "%%%" },
	} {
		c := *st
		edit(&c)
		if err := c.Verify(trusted); !errors.Is(err, ErrApprovalInvalid) {
			t.Errorf("%s changed: Verify = %v, want ErrApprovalInvalid", name, err)
		}
	}
	// Signed by a key that is not trusted; trusted after a rotation.
	byOther := signedStatement(t, other, time.Now())
	if err := byOther.Verify(trusted); !errors.Is(err, ErrApprovalInvalid) {
		t.Errorf("unknown key: Verify = %v", err)
	}
	if err := trusted.Add(pubKey(other)); err != nil {
		t.Fatal(err)
	}
	if err := byOther.Verify(trusted); err != nil {
		t.Errorf("second key of a rotation: %v", err)
	}
	trusted.Remove(pubKey(kp))
	if err := st.Verify(trusted); !errors.Is(err, ErrApprovalInvalid) {
		t.Errorf("removed key: Verify = %v", err)
	}
	// A key claimed in the statement that is not what signed it.
	forged := signedStatement(t, other, time.Now())
	forged.Key = pubKey(kp)
	trusted.Add(pubKey(kp))
	if err := forged.Verify(trusted); !errors.Is(err, ErrApprovalInvalid) {
		t.Errorf("forged key: Verify = %v", err)
	}
	var none *KeySet
	if err := st.Verify(none); !errors.Is(err, ErrApprovalInvalid) {
		t.Errorf("no keys: Verify = %v", err)
	}
}

func TestStatementPermits(t *testing.T) {
	kp, _ := nkeys.CreateOperator()
	now := time.Now()
	st := signedStatement(t, kp, now)
	tests := []struct {
		name                     string
		call, server, tool, hash string
		at                       time.Time
		decision                 ApprovalStatus
		wantErr                  bool
	}{
		{"this call", "ap-1", "resources", "resources_add", "sha256:00", now, ApprovalApproved, false},
		{"other call", "ap-2", "resources", "resources_add", "sha256:00", now, ApprovalApproved, true},
		{"other server", "ap-1", "files", "resources_add", "sha256:00", now, ApprovalApproved, true},
		{"other tool", "ap-1", "resources", "resources_remove", "sha256:00", now, ApprovalApproved, true},
		{"other arguments", "ap-1", "resources", "resources_add", "sha256:01", now, ApprovalApproved, true},
		{"rejected", "ap-1", "resources", "resources_add", "sha256:00", now, ApprovalRejected, true},
		{"old", "ap-1", "resources", "resources_add", "sha256:00", now.Add(-ApprovalMaxAge - time.Second), ApprovalApproved, true},
		{"skewed a little", "ap-1", "resources", "resources_add", "sha256:00", now.Add(time.Minute), ApprovalApproved, false},
		{"in the future", "ap-1", "resources", "resources_add", "sha256:00", now.Add(time.Hour), ApprovalApproved, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *st
			c.Decision, c.At = tt.decision, tt.at.UTC().Format(time.RFC3339Nano)
			err := c.Permits(tt.call, tt.server, tt.tool, tt.hash, now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Permits = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrApprovalInvalid) {
				t.Errorf("err = %v, want ErrApprovalInvalid", err)
			}
		})
	}
}

// pubKey is kp's public key.
func pubKey(kp nkeys.KeyPair) string {
	pub, _ := kp.PublicKey()
	return pub
}
