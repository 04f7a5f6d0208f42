package approver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// decideAs decides with the Mesh-Principal header, as the bridge does.
func decideAs(t *testing.T, m *meshtest.Mesh, id, body, principal string) (*mesh.Approval, error) {
	t.Helper()
	subj, _ := m.NS.ApprovalDecide(id)
	msg := nats.NewMsg(subj)
	msg.Data = []byte(body)
	if principal != "" {
		msg.Header.Set(mesh.HeaderPrincipal, principal)
	}
	reply, err := m.NC.RequestMsg(msg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := mesh.ErrorFromMsg(reply); err != nil {
		return nil, err
	}
	var ap mesh.Approval
	if err := json.Unmarshal(reply.Data, &ap); err != nil {
		t.Fatal(err)
	}
	return &ap, nil
}

func keys(t *testing.T, pub ...string) *mesh.KeySet {
	t.Helper()
	ks, err := mesh.NewKeySet(pub...)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestRequestCreatesASealedPendingApproval(t *testing.T) {
	m := meshtest.New(t)
	kp := start(t, m)
	ask := asking()
	ap, err := bus.RequestApproval(t.Context(), m.NC, m.NS, ask)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := mesh.ArgsHash(ask.ToolArgs)
	if ap.Status != mesh.ApprovalPending {
		t.Fatalf("created status = %q, want %q", ap.Status, mesh.ApprovalPending)
	}
	if ap.UUID != ask.UUID {
		t.Fatalf("created uuid = %q, want the request's %q", ap.UUID, ask.UUID)
	}
	if ap.CallID != ask.UUID {
		t.Fatalf("created call id = %q, want the request's uuid %q", ap.CallID, ask.UUID)
	}
	if ap.ArgsHash != hash {
		t.Fatalf("created args hash = %q, want %q", ap.ArgsHash, hash)
	}
	if ap.Decision != nil {
		t.Fatalf("created with a decision: %+v", ap.Decision)
	}
	if ap.Seal == nil {
		t.Fatal("created without a seal")
	}
	if err := ap.Seal.Verify(keys(t, identity.PublicKey(kp))); err != nil {
		t.Fatalf("seal does not verify with the approver's key: %v", err)
	}
	if ap.Seal.ArgsHash != hash {
		t.Fatalf("seal args hash = %q, want %q", ap.Seal.ArgsHash, hash)
	}
	if ap.Seal.Decision != mesh.ApprovalPending {
		t.Fatalf("seal decision = %q, want %q", ap.Seal.Decision, mesh.ApprovalPending)
	}
	// Asked again, with other arguments: the record as it stands.
	again := *ask
	again.ToolArgs = map[string]any{"x": 2}
	got, err := bus.RequestApproval(t.Context(), m.NC, m.NS, &again)
	if err != nil || got.ArgsHash != hash || got.ToolArgs["x"] != 1.0 {
		t.Errorf("asked again: %+v, %v", got, err)
	}
	// What only the approver may say is not taken from the request.
	forged := asking()
	forged.Status, forged.Decision = mesh.ApprovalApproved, &mesh.Decision{Approved: true}
	forged.ArgsHash, forged.CallID = "sha256:00", "c-forged"
	got, err = bus.RequestApproval(t.Context(), m.NC, m.NS, forged)
	if err != nil {
		t.Fatalf("a request that claims a decision: %v", err)
	}
	if got.Status != mesh.ApprovalPending {
		t.Errorf("a request that claims a decision: status = %q, want %q", got.Status, mesh.ApprovalPending)
	}
	if got.Decision != nil {
		t.Errorf("a request that claims a decision: decision taken from the request: %+v", got.Decision)
	}
	if got.ArgsHash == "sha256:00" {
		t.Errorf("a request that claims a decision: args hash %q taken from the request", got.ArgsHash)
	}
	if got.CallID != forged.UUID {
		t.Errorf("a request that claims a decision: call id = %q, want its uuid %q", got.CallID, forged.UUID)
	}
	bad := asking()
	bad.Agent = "a.b"
	if _, err := bus.RequestApproval(t.Context(), m.NC, m.NS, bad); !errors.Is(err, mesh.ErrBadRequest) {
		t.Errorf("agent that is no token: %v", err)
	}
}

func TestDecisionIsSigned(t *testing.T) {
	m := meshtest.New(t)
	kp := start(t, m)
	ap := pending(t, m)
	got, err := decideAs(t, m, ap.UUID, `{"approved": true, "by": "claimed"}`, "alice")
	if err != nil {
		t.Fatal(err)
	}
	st := got.Decision.Statement
	if st == nil {
		t.Fatal("no signed statement with the decision")
	}
	if err := st.Verify(keys(t, identity.PublicKey(kp))); err != nil {
		t.Fatalf("statement: %v", err)
	}
	want := mesh.ApprovalStatement{Type: mesh.StatementType, ApprovalID: ap.UUID, CallID: ap.UUID, Server: "srv", Tool: "danger",
		ArgsHash: ap.ArgsHash, Decision: mesh.ApprovalApproved, By: "alice", At: got.DecidedAt.Format(time.RFC3339Nano), Key: identity.PublicKey(kp), Sig: st.Sig}
	if *st != want {
		t.Errorf("statement\n got %+v\nwant %+v", *st, want)
	}
	if got.Decision.By != "alice" {
		t.Errorf("by = %q: the principal header names who decided, not the body", got.Decision.By)
	}
	if err := st.Permits(ap.UUID, "srv", "danger", ap.ArgsHash, time.Now()); err != nil {
		t.Errorf("the statement does not permit the approved call: %v", err)
	}
	stored, _ := store.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
	if stored.Decision == nil || stored.Decision.Statement == nil || stored.Decision.Statement.Sig != st.Sig {
		t.Error("the signed statement is not stored with the decision")
	}

	// Without the header, the body's "by"; a rejection is signed too.
	ap2 := pending(t, m)
	got, err = decideAs(t, m, ap2.UUID, `{"approved": false, "by": "bob"}`, "")
	if err != nil {
		t.Fatal(err)
	}
	st = got.Decision.Statement
	if st == nil {
		t.Fatal("a rejection without a signed statement")
	}
	if st.By != "bob" {
		t.Errorf("rejection statement by = %q, want the body's bob", st.By)
	}
	if st.Decision != mesh.ApprovalRejected {
		t.Errorf("rejection statement decision = %q, want %q", st.Decision, mesh.ApprovalRejected)
	}
	if err := st.Verify(keys(t, identity.PublicKey(kp))); err != nil {
		t.Errorf("rejection statement does not verify with the approver's key: %v", err)
	}
}

// TestTamperedApprovalIsNotSigned rewrites a pending approval in the bucket
// after the person read it: the approver refuses to approve it.
func TestTamperedApprovalIsNotSigned(t *testing.T) {
	m := meshtest.New(t)
	start(t, m)
	rewrite := func(id string, edit func(*mesh.Approval)) {
		t.Helper()
		if _, err := store.NewApprovalStore(m.Approvals).Update(t.Context(), id, func(a *mesh.Approval) error { edit(a); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		edit func(*mesh.Approval)
	}{
		{"arguments", func(a *mesh.Approval) { a.ToolArgs = map[string]any{"x": 666} }},
		{"arguments and their hash", func(a *mesh.Approval) {
			a.ToolArgs = map[string]any{"x": 666}
			a.ArgsHash, _ = mesh.ArgsHash(a.ToolArgs)
		}},
		{"arguments, hash and seal's hash", func(a *mesh.Approval) {
			a.ToolArgs = map[string]any{"x": 666}
			a.ArgsHash, _ = mesh.ArgsHash(a.ToolArgs)
			a.Seal.ArgsHash = a.ArgsHash
		}},
		{"tool", func(a *mesh.Approval) { a.Tool = "other" }},
		{"call id", func(a *mesh.Approval) { a.CallID = "another-call" }},
		{"seal removed", func(a *mesh.Approval) { a.Seal = nil }},
		// What the person reads beside the call, and where the resume goes.
		{"description", func(a *mesh.Approval) { a.Description = "add one harmless resource" }},
		{"conversation", func(a *mesh.Approval) { a.ConversationID = mesh.NewID() }},
		{"agent", func(a *mesh.Approval) { a.Agent = "other-agent" }},
		{"step", func(a *mesh.Approval) { a.StepPath = []int{3} }},
		{"a seal without the record's hash", func(a *mesh.Approval) { a.Seal.Asked = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap := pending(t, m)
			rewrite(ap.UUID, tt.edit)
			if _, err := decideAs(t, m, ap.UUID, `{"approved": true}`, "alice"); !errors.Is(err, mesh.ErrApprovalTampered) {
				t.Fatalf("approve: err = %v, want approval_tampered", err)
			}
			cur, _ := store.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
			if cur.Status != mesh.ApprovalPending || cur.Decision != nil {
				t.Fatalf("a refused approval was recorded: %+v", cur)
			}
			// It can still be rejected, so the conversation goes on.
			got, err := decideAs(t, m, ap.UUID, `{"approved": false}`, "alice")
			if err != nil || got.Status != mesh.ApprovalRejected {
				t.Errorf("reject: %+v, %v", got, err)
			}
		})
	}
}

func TestDecisionWithTheArgumentsShown(t *testing.T) {
	m := meshtest.New(t)
	start(t, m)
	ap := pending(t, m)
	other, _ := mesh.ArgsHash(map[string]any{"x": 2})
	if _, err := decideAs(t, m, ap.UUID, `{"approved": true, "args_hash": "`+other+`"}`, ""); !errors.Is(err, mesh.ErrApprovalArgsChanged) {
		t.Fatalf("other arguments shown: err = %v, want approval_args_changed", err)
	}
	got, err := decideAs(t, m, ap.UUID, `{"approved": true, "args_hash": "`+ap.ArgsHash+`"}`, "")
	if err != nil || got.Status != mesh.ApprovalApproved || got.Decision.ArgsHash != ap.ArgsHash {
		t.Fatalf("the arguments shown: %+v, %v", got, err)
	}
}

func TestApproverPublishesItsKey(t *testing.T) {
	m := meshtest.New(t)
	kp := start(t, m)
	e, err := m.Approvals.Get(t.Context(), mesh.ApprovalKeysPrefix+identity.PublicKey(kp))
	if err != nil {
		t.Fatal(err)
	}
	var pub mesh.ApproverKey
	if err := json.Unmarshal(e.Value(), &pub); err != nil || pub.Key != identity.PublicKey(kp) {
		t.Errorf("published %s (%v)", e.Value(), err)
	}
	list, err := store.NewApprovalStore(m.Approvals).List(t.Context(), "")
	if err != nil || len(list) != 0 {
		t.Errorf("the key entry is listed as an approval: %v, %v", list, err)
	}
}

func TestPolicyDecisions(t *testing.T) {
	m := meshtest.New(t)
	no := false
	additive := &mesh.ToolAnnotations{DestructiveHint: &no}
	for key, v := range map[string]any{
		"srv.create": mesh.ToolEntry{Server: "srv", Name: "create", Annotations: additive},
		"srv.danger": mesh.ToolEntry{Server: "srv", Name: "danger", DestructiveHint: true},
		// Entries a tool host would not write: hints that contradict the
		// annotations, another tool's entry, a value that is no entry.
		"srv.unannotated": mesh.ToolEntry{Server: "srv", Name: "unannotated"},
		"srv.moved":       mesh.ToolEntry{Server: "srv", Name: "create", Annotations: additive},
		"srv.junk":        map[string]any{"text": "a tool's result", "is_error": false},
	} {
		data, _ := json.Marshal(v)
		if _, err := m.Tools.Put(t.Context(), key, data); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse("test.yaml", []byte(`name: tester
llm: {model: offline}
agent:
  name: root
  type: sequential
  agents:
    - {name: careful, type: llm}
    - {name: bold, type: llm, allow_destructive: true}
    - {name: narrow, type: llm, allow_destructive: true, tools: [other]}
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	kp := signer(t)
	startWith(t, m, Config{Signer: kp, Tools: m.Tools, Agents: &cfg.Definition})
	cons := resumes(t, m)

	ask := func(policy, tool string, path []int, agent string) (*mesh.Approval, error) {
		ap := asking()
		ap.Policy, ap.Tool, ap.ToolName, ap.StepPath, ap.Agent = policy, tool, tool, path, agent
		ap.CallID = "run-c1-0"
		return bus.RequestApproval(t.Context(), m.NC, m.NS, ap)
	}
	tests := []struct {
		name, policy, tool, agent string
		path                      []int
		wantErr                   error
	}{
		{"not destructive", mesh.PolicyNonDestructive, "create", "tester", nil, nil},
		{"destructive claimed not to be", mesh.PolicyNonDestructive, "danger", "tester", nil, mesh.ErrApprovalPolicy},
		{"not in the catalog", mesh.PolicyNonDestructive, "nope", "tester", nil, mesh.ErrApprovalPolicy},
		{"no annotations: destructive by default", mesh.PolicyNonDestructive, "unannotated", "tester", nil, mesh.ErrApprovalPolicy},
		{"another tool's entry under its key", mesh.PolicyNonDestructive, "moved", "tester", nil, mesh.ErrApprovalPolicy},
		{"a value that is no entry", mesh.PolicyNonDestructive, "junk", "tester", nil, mesh.ErrApprovalPolicy},
		{"step that allows it", mesh.PolicyAllowDestructive, "danger", "tester", []int{1}, nil},
		{"step that does not", mesh.PolicyAllowDestructive, "danger", "tester", []int{0}, mesh.ErrApprovalPolicy},
		{"the root does not", mesh.PolicyAllowDestructive, "danger", "tester", nil, mesh.ErrApprovalPolicy},
		{"no such step", mesh.PolicyAllowDestructive, "danger", "tester", []int{7}, mesh.ErrApprovalPolicy},
		{"tool the step is not offered", mesh.PolicyAllowDestructive, "danger", "tester", []int{2}, mesh.ErrApprovalPolicy},
		{"unknown agent", mesh.PolicyAllowDestructive, "danger", "stranger", []int{1}, mesh.ErrApprovalPolicy},
		{"unknown policy", "because", "danger", "tester", nil, mesh.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap, err := ask(tt.policy, tt.tool, tt.path, tt.agent)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := ap.Decision.Statement
			if ap.Status != mesh.ApprovalApproved || st == nil || st.By != mesh.PolicyBy(tt.policy) {
				t.Fatalf("policy decision %+v", ap)
			}
			if err := st.Verify(keys(t, identity.PublicKey(kp))); err != nil {
				t.Fatal(err)
			}
			if err := st.Permits("run-c1-0", "srv", tt.tool, ap.ArgsHash, time.Now()); err != nil {
				t.Errorf("the statement does not permit the model's call: %v", err)
			}
		})
	}
	// Nothing pending, and no resume: the call runs at once.
	if list, _ := store.NewApprovalStore(m.Approvals).List(t.Context(), mesh.ApprovalPending); len(list) != 0 {
		t.Errorf("policy decisions listed as pending: %d", len(list))
	}
	time.Sleep(300 * time.Millisecond) // past the sweep's grace: it must not enqueue resumes
	if info, err := cons.Info(t.Context()); err != nil || info.NumPending != 0 {
		t.Errorf("resumes enqueued for policy decisions: %+v, %v", info, err)
	}
}

// reseal asks the approver to seal approval id, as mesh migrate --apply does.
func reseal(t *testing.T, m *meshtest.Mesh, id, argsHash string) (*mesh.Approval, error) {
	t.Helper()
	return bus.ResealApproval(t.Context(), m.NC, m.NS, id, mesh.Reseal{ArgsHash: argsHash})
}

// A pending approval recorded by a release before seals (no seal, no
// hash, no call id) cannot be approved until an admin who read it has the
// approver seal it; then a person decides it as any other.
func TestApprovalAskedBeforeSealsIsSealedOnceAnAdminReadIt(t *testing.T) {
	m := meshtest.New(t)
	kp := start(t, m)
	old := asking()
	old.Tool, old.Status, old.CreatedAt = "", mesh.ApprovalPending, time.Now().Add(-time.Hour).UTC().Round(time.Millisecond)
	if err := store.NewApprovalStore(m.Approvals).Create(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if _, err := decideAs(t, m, old.UUID, `{"approved": true}`, "alice"); !errors.Is(err, mesh.ErrApprovalTampered) || !strings.Contains(err.Error(), "mesh migrate") {
		t.Fatalf("approve before the seal: %v, want approval_tampered naming mesh migrate", err)
	}
	hash, _ := mesh.ArgsHash(old.ToolArgs)
	other, _ := mesh.ArgsHash(map[string]any{"x": 2})
	if _, err := reseal(t, m, old.UUID, other); !errors.Is(err, mesh.ErrApprovalArgsChanged) {
		t.Fatalf("reseal with other arguments read: %v, want approval_args_changed", err)
	}
	if _, err := reseal(t, m, mesh.NewID(), hash); !errors.Is(err, mesh.ErrApprovalNotFound) {
		t.Fatalf("reseal of an unknown approval: %v, want approval_not_found", err)
	}
	got, err := reseal(t, m, old.UUID, hash)
	if err != nil || got.Status != mesh.ApprovalPending || got.ArgsHash != hash || got.CallID != old.UUID || got.Tool != old.ToolName || !got.CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("reseal: %+v, %v", got, err)
	}
	cur, _ := store.NewApprovalStore(m.Approvals).Get(t.Context(), old.UUID)
	if cur.Seal == nil || cur.Seal.Verify(keys(t, identity.PublicKey(kp))) != nil {
		t.Fatalf("the record is not sealed by the approver: %+v", cur.Seal)
	}
	if again, err := reseal(t, m, old.UUID, hash); err != nil || again.ArgsHash != hash {
		t.Fatalf("reseal of a sealed approval: %+v, %v, want it as it stands", again, err)
	}
	dec, err := decideAs(t, m, old.UUID, `{"approved": true, "args_hash": "`+hash+`"}`, "alice")
	if err != nil || dec.Status != mesh.ApprovalApproved {
		t.Fatalf("approve after the seal: %+v, %v", dec, err)
	}
	if st := dec.Decision.Statement; st == nil || st.Verify(keys(t, identity.PublicKey(kp))) != nil || st.CallID != old.UUID || st.ArgsHash != hash {
		t.Fatalf("the decision's statement: %+v", st)
	}
	if _, err := reseal(t, m, old.UUID, hash); !errors.Is(err, mesh.ErrApprovalDecided) {
		t.Fatalf("reseal of a decided approval: %v, want approval_decided", err)
	}
	if _, err := reseal(t, m, old.UUID, ""); !errors.Is(err, mesh.ErrBadRequest) {
		t.Fatalf("reseal without args_hash: %v, want bad_request", err)
	}
}
