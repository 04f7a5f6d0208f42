package mesh

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDecision(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    bool
		wantErr string
	}{
		{"approved true", `{"approved": true}`, true, ""},
		{"approved false", `{"approved": false}`, false, ""},
		{"action approve", `{"action": "approve"}`, true, ""},
		{"action reject", `{"action": "reject"}`, false, ""},
		{"answer yes", `{"answer": "yes"}`, true, ""},
		{"answer no", `{"answer": "No"}`, false, ""},
		{"with by and reason", `{"approved": true, "by": "alice", "reason": "ok"}`, true, ""},
		{"empty", ``, false, "empty body"},
		{"malformed", `{"approved": tru`, false, "invalid decision"},
		{"wrong type", `{"approved": "yes"}`, false, `"approved" must be a boolean`},
		{"unknown word", `{"answer": "maybe"}`, false, "neither an approval nor a rejection"},
		{"contradiction", `{"approved": true, "answer": "no"}`, false, "contradict"},
		{"nothing", `{"comment": "hi"}`, false, "no decision found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseDecision([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if !errors.Is(err, ErrBadRequest) {
					t.Errorf("err = %v, want ErrBadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if d.Approved != tt.want {
				t.Errorf("approved = %v, want %v", d.Approved, tt.want)
			}
		})
	}
}

func TestParseApprovalWord(t *testing.T) {
	for _, tt := range []struct {
		in              string
		approved, known bool
	}{
		{"approved", true, true}, {"Yes.", true, true}, {" ok ", true, true},
		{"rejected", false, true}, {"no", false, true}, {"deny", false, true},
		{"list all resources", false, false}, {"", false, false},
	} {
		a, k := ParseApprovalWord(tt.in)
		if a != tt.approved || k != tt.known {
			t.Errorf("ParseApprovalWord(%q) = %v, %v; want %v, %v", tt.in, a, k, tt.approved, tt.known)
		}
	}
}
