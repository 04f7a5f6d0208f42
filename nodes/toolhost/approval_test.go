package toolhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// raw calls a tool with exactly req: no approval is added.
func (r *running) raw(t *testing.T, server, tool string, req mesh.ToolRequest) (*mesh.ToolResult, error) {
	t.Helper()
	return bus.CallTool(t.Context(), r.NC, r.NS, server, tool, req, nil)
}

// TestToolThatIsNotReadOnlyRunsOnlyWithItsApproval sends the calls an
// attacker on the bus could: none runs the tool, and the approved call runs
// once however often it is sent.
func TestToolThatIsNotReadOnlyRunsOnlyWithItsApproval(t *testing.T) {
	srv, counter := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")
	other := testApprover(t)
	signed := func(edit func(*mesh.ApprovalStatement)) *mesh.ApprovalStatement {
		st := approve(t, r.approver, "c-1", "local", "count", nil)
		if edit != nil {
			edit(st)
			if err := st.Sign(r.approver); err != nil {
				t.Fatal(err)
			}
		}
		return st
	}
	tests := []struct {
		name     string
		req      mesh.ToolRequest
		wantKind error
	}{
		{"no approval", mesh.ToolRequest{CallID: "c-1"}, mesh.ErrApprovalRequired},
		{"approval of another call id", mesh.ToolRequest{CallID: "c-1", Approval: approve(t, r.approver, "c-2", "local", "count", nil)}, mesh.ErrApprovalInvalid},
		{"approval for other arguments", mesh.ToolRequest{CallID: "c-1", Arguments: map[string]any{"n": 2}, Approval: signed(nil)}, mesh.ErrApprovalInvalid},
		{"approval of another tool", mesh.ToolRequest{CallID: "c-1", Approval: approve(t, r.approver, "c-1", "local", "add", nil)}, mesh.ErrApprovalInvalid},
		{"approval of another server", mesh.ToolRequest{CallID: "c-1", Approval: approve(t, r.approver, "c-1", "elsewhere", "count", nil)}, mesh.ErrApprovalInvalid},
		{"bad signature", mesh.ToolRequest{CallID: "c-1", Approval: func() *mesh.ApprovalStatement {
			st := signed(nil)
			st.By = "someone else" // changed after signing
			return st
		}()}, mesh.ErrApprovalInvalid},
		{"no signature", mesh.ToolRequest{CallID: "c-1", Approval: func() *mesh.ApprovalStatement {
			st := signed(nil)
			st.Sig = ""
			return st
		}()}, mesh.ErrApprovalInvalid},
		{"unknown key", mesh.ToolRequest{CallID: "c-1", Approval: approve(t, other, "c-1", "local", "count", nil)}, mesh.ErrApprovalInvalid},
		{"rejected", mesh.ToolRequest{CallID: "c-1", Approval: signed(func(s *mesh.ApprovalStatement) { s.Decision = mesh.ApprovalRejected })}, mesh.ErrApprovalInvalid},
		{"pending (a seal)", mesh.ToolRequest{CallID: "c-1", Approval: signed(func(s *mesh.ApprovalStatement) { s.Decision = mesh.ApprovalPending })}, mesh.ErrApprovalInvalid},
		{"expired", mesh.ToolRequest{CallID: "c-1", Approval: signed(func(s *mesh.ApprovalStatement) {
			s.At = time.Now().Add(-mesh.ApprovalMaxAge - time.Minute).UTC().Format(time.RFC3339Nano)
		})}, mesh.ErrApprovalInvalid},
		{"from the future", mesh.ToolRequest{CallID: "c-1", Approval: signed(func(s *mesh.ApprovalStatement) {
			s.At = time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
		})}, mesh.ErrApprovalInvalid},
		{"another type", mesh.ToolRequest{CallID: "c-1", Approval: signed(func(s *mesh.ApprovalStatement) { s.Type = "something.else" })}, mesh.ErrApprovalInvalid},
		// The approver signed by policy non_destructive (the catalog said
		// so), but this host's server says count is destructive.
		{"policy non_destructive for a destructive tool", mesh.ToolRequest{CallID: "c-1", Approval: signed(func(s *mesh.ApprovalStatement) {
			s.By = mesh.PolicyBy(mesh.PolicyNonDestructive)
		})}, mesh.ErrApprovalInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.raw(t, "local", "count", tt.req)
			if !errors.Is(err, tt.wantKind) {
				t.Fatalf("err = %v, want %v", err, tt.wantKind)
			}
			if mesh.HTTPStatus(err) != 403 {
				t.Errorf("status = %d, want 403", mesh.HTTPStatus(err))
			}
		})
	}
	if n := readCount(counter); n != 0 {
		t.Fatalf("count ran %d times without a valid approval", n)
	}
	if _, err := r.Calls.Get(t.Context(), "c-1"); err == nil {
		t.Error("a refused call left a call record")
	}

	good := mesh.ToolRequest{CallID: "c-1", Approval: signed(nil)}
	first, err := r.raw(t, "local", "count", good)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.raw(t, "local", "count", good)
	if err != nil {
		t.Fatal(err)
	}
	if n := readCount(counter); n != 1 || first.Text != again.Text {
		t.Errorf("count ran %d times (answers %q, %q), want once with the first answer repeated", n, first.Text, again.Text)
	}
	// A valid approval of the same call id for other arguments does not
	// run it again either.
	otherArgs := map[string]any{"n": 2}
	if _, err := r.raw(t, "local", "count", mesh.ToolRequest{CallID: "c-1", Arguments: otherArgs, Approval: approve(t, r.approver, "c-1", "local", "count", otherArgs)}); err != nil {
		t.Fatal(err)
	}
	if n := readCount(counter); n != 1 {
		t.Errorf("count ran %d times, want 1", n)
	}

	// Read-only tools answer plain requests, as before.
	res, err := r.raw(t, "local", "echo", mesh.ToolRequest{Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.Text != "echo: hi" {
		t.Errorf("echo without an approval = %+v, %v", res, err)
	}
}

// TestNonDestructiveToolNeedsAnApprovalToo: add says destructiveHint false,
// but it is not read-only, so it runs only with an approval (a policy's,
// which the host honours because its own server says add is not destructive).
func TestNonDestructiveToolNeedsAnApprovalToo(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")
	args := map[string]any{"a": 2, "b": 3}
	if _, err := r.raw(t, "local", "add", mesh.ToolRequest{CallID: "a-1", Arguments: args}); !errors.Is(err, mesh.ErrApprovalRequired) {
		t.Fatalf("add without approval: err = %v, want approval_required", err)
	}
	byPolicy := approve(t, r.approver, "a-1", "local", "add", args)
	byPolicy.By = mesh.PolicyBy(mesh.PolicyNonDestructive)
	if err := byPolicy.Sign(r.approver); err != nil {
		t.Fatal(err)
	}
	res, err := r.raw(t, "local", "add", mesh.ToolRequest{CallID: "a-1", Arguments: args, Approval: byPolicy})
	if err != nil || res.Text != "5" {
		t.Fatalf("add with its approval by policy non_destructive = %+v, %v", res, err)
	}
}

// TestApproverKeysFromTheBucket: without configured keys, the host trusts
// the keys the approvers publish, including one published after it
// started, and stops trusting one that is withdrawn.
func TestApproverKeysFromTheBucket(t *testing.T) {
	srv, counter := stdioServer(t, "local")
	early, late := testApprover(t), testApprover(t)
	publish := func(m *meshtest.Mesh, key string) {
		data, _ := json.Marshal(mesh.ApproverKey{Key: key, Node: "approver-1", At: time.Now()})
		if _, err := m.Approvals.Put(t.Context(), mesh.ApprovalKeysPrefix+key, data); err != nil {
			t.Fatal(err)
		}
	}
	r := startHostOn(t, meshtest.New(t), func(c *Config) {
		c.ApproverKeys = nil
		c.Approvals = nil // opened through JS
	}, func(m *meshtest.Mesh) { publish(m, identity.PublicKey(early)) }, srv)
	r.waitServing(t, "local")

	ran := 0 // calls that got a result
	call := func(kp nkeys.KeyPair, id string) error {
		_, err := r.raw(t, "local", "count", mesh.ToolRequest{CallID: id, Approval: approve(t, kp, id, "local", "count", nil)})
		if err == nil {
			ran++
		}
		return err
	}
	if err := call(early, "k-1"); err != nil {
		t.Fatalf("key published before the start: %v", err)
	}
	if err := call(late, "k-2"); !errors.Is(err, mesh.ErrApprovalInvalid) {
		t.Fatalf("unpublished key: err = %v, want approval_invalid", err)
	}
	publish(r.Mesh, identity.PublicKey(late))
	n := 0
	meshtest.Eventually(t, 5*time.Second, func() bool { n++; return call(late, fmt.Sprintf("k-3-%d", n)) == nil }, "a key published later is trusted")
	if err := r.Approvals.Delete(t.Context(), mesh.ApprovalKeysPrefix+identity.PublicKey(early)); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		n++
		return errors.Is(call(early, fmt.Sprintf("k-4-%d", n)), mesh.ErrApprovalInvalid)
	}, "a withdrawn key is no longer trusted")
	if got := readCount(counter); got != ran {
		t.Errorf("count ran %d times, but %d calls were accepted: refused calls ran", got, ran)
	}
}
