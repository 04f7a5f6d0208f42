package approver

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// signer is a fresh approver signing key.
func signer(t *testing.T) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// start runs an approver on m and returns its signing key.
func start(t *testing.T, m *meshtest.Mesh) nkeys.KeyPair {
	t.Helper()
	kp := signer(t)
	startWith(t, m, Config{Signer: kp})
	return kp
}

// startWith runs an approver with cfg on m (its connection, buckets and
// timings filled in).
func startWith(t *testing.T, m *meshtest.Mesh, cfg Config) {
	t.Helper()
	cfg.NC, cfg.JS, cfg.NS, cfg.Approvals, cfg.NodeID = m.NC, m.JS, m.NS, m.Approvals, "t"
	cfg.SweepInterval, cfg.Grace, cfg.Logger = 50*time.Millisecond, 100*time.Millisecond, zerolog.Nop()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	meshtest.Eventually(t, 5*time.Second, func() bool {
		_, err := m.NC.Request("$SRV.PING."+ServiceName, nil, time.Second)
		return err == nil
	}, "approver service not up")
}

// asking is an approval as an agent asks for it.
func asking() *mesh.Approval {
	return &mesh.Approval{UUID: mesh.NewID(), ConversationID: mesh.NewID(), SessionID: "abcd1234", Agent: "tester", RunID: "r", ToolCallID: "c",
		ToolName: "danger", Server: "srv", Tool: "danger", ToolArgs: map[string]any{"x": 1}}
}

// pending asks the running approver for an approval, as an agent does.
func pending(t *testing.T, m *meshtest.Mesh) *mesh.Approval {
	t.Helper()
	ap, err := bus.RequestApproval(t.Context(), m.NC, m.NS, asking())
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// stored writes an approval straight into the bucket, as an approver that
// died after its write left it.
func stored(t *testing.T, m *meshtest.Mesh) *mesh.Approval {
	t.Helper()
	ap := asking()
	if err := store.NewApprovalStore(m.Approvals).Create(t.Context(), ap); err != nil {
		t.Fatal(err)
	}
	return ap
}

func decide(t *testing.T, m *meshtest.Mesh, id, body, token string) (*nats.Msg, error) {
	t.Helper()
	subj, _ := m.NS.ApprovalDecide(id)
	msg := nats.NewMsg(subj)
	msg.Data = []byte(body)
	if token != "" {
		msg.Header.Set(mesh.HeaderAuthorization, token)
	}
	reply, err := m.NC.RequestMsg(msg, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return reply, mesh.ErrorFromMsg(reply)
}

// resumes reads the resume work items of agent "tester".
func resumes(t *testing.T, m *meshtest.Mesh) jetstream.Consumer {
	t.Helper()
	c, err := m.JS.CreateOrUpdateConsumer(t.Context(), m.NS.Stream(mesh.StreamWork), jetstream.ConsumerConfig{Durable: "agent_tester", FilterSubject: "mesh.work.agent.tester.*", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDecideEnqueuesResumeOnce(t *testing.T) {
	for _, body := range []string{`{"approved": true}`, `{"action": "approve"}`, `{"answer": "yes"}`, `{"answer": "no"}`} {
		t.Run(body, func(t *testing.T) {
			m := meshtest.New(t)
			start(t, m)
			cons := resumes(t, m)
			ap := pending(t, m)

			reply, err := decide(t, m, ap.UUID, body, "Bearer tok")
			if err != nil {
				t.Fatal(err)
			}
			var got mesh.Approval
			if err := json.Unmarshal(reply.Data, &got); err != nil {
				t.Fatal(err)
			}
			wantApproved := body != `{"answer": "no"}`
			if (got.Status == mesh.ApprovalApproved) != wantApproved || got.Decision == nil {
				t.Errorf("approval = %+v", got)
			}
			msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for msg := range msgs.Messages() {
				var item mesh.WorkItem
				_ = json.Unmarshal(msg.Data(), &item)
				if item.Kind != mesh.WorkResume || item.ApprovalID != ap.UUID || item.Session != ap.ConversationID {
					t.Errorf("work item = %+v", item)
				}
				if msg.Headers().Get(mesh.HeaderAuthorization) != "Bearer tok" || msg.Headers().Get(mesh.HeaderSessionID) != "abcd1234" {
					t.Errorf("headers = %v: the decider's token and the trace id must follow the resume", msg.Headers())
				}
				_ = msg.Ack()
			}

			// A second decision is a conflict that carries the first one.
			reply, err = decide(t, m, ap.UUID, `{"approved": false}`, "")
			if !errors.Is(err, mesh.ErrApprovalDecided) {
				t.Fatalf("second decision: err = %v", err)
			}
			var first mesh.Approval
			if json.Unmarshal(reply.Data, &first) != nil || first.Status != got.Status {
				t.Errorf("conflict body = %s", reply.Data)
			}
			stored, _ := store.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
			if !stored.ResumeEnqueued {
				t.Error("resume not marked as enqueued")
			}
		})
	}
}

// A decision sent again with its id (its first answer was lost) is
// answered as the first was, and changes nothing; another decision, even
// the same verdict, is still refused. The request is a raw NATS one.
func TestDecisionSentAgainIsAnsweredAsTheFirst(t *testing.T) {
	m := meshtest.New(t)
	start(t, m)
	cons := resumes(t, m)
	ap := pending(t, m)
	subj, _ := m.NS.ApprovalDecide(ap.UUID)
	send := func(id, body string) (*mesh.Approval, error) {
		msg := nats.NewMsg(subj)
		msg.Data = []byte(body)
		if id != "" {
			msg.Header.Set(mesh.HeaderDecisionID, id)
		}
		reply, err := m.NC.RequestMsg(msg, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var got mesh.Approval
		_ = json.Unmarshal(reply.Data, &got)
		return &got, mesh.ErrorFromMsg(reply)
	}
	first, err := send("d-1", `{"approved": true}`)
	if err != nil {
		t.Fatal(err)
	}
	again, err := send("d-1", `{"approved": true}`)
	if err != nil {
		t.Fatalf("the same decision sent again: %v", err)
	}
	if again.Status != mesh.ApprovalApproved || again.Decision == nil || !again.DecidedAt.Equal(first.DecidedAt) || again.Decision.Statement.Sig != first.Decision.Statement.Sig {
		t.Errorf("the repeat's answer %+v is not the first decision %+v", again.Decision, first.Decision)
	}
	for _, other := range []struct{ id, body string }{{"d-2", `{"approved": true}`}, {"", `{"approved": true}`}, {"d-1x", `{"approved": false}`}} {
		if _, err := send(other.id, other.body); !errors.Is(err, mesh.ErrApprovalDecided) {
			t.Errorf("decision %q %s after d-1: err = %v, want approval_decided", other.id, other.body, err)
		}
	}
	msgs, err := cons.Fetch(2, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range msgs.Messages() {
		n++
	}
	if n != 1 {
		t.Errorf("%d resumes enqueued, want 1", n)
	}
}

func TestDecideRefusesBadRequests(t *testing.T) {
	m := meshtest.New(t)
	start(t, m)
	ap := pending(t, m)
	tests := []struct {
		name, id, body string
		want           error
	}{
		{"unknown approval", mesh.NewID(), `{"approved": true}`, mesh.ErrApprovalNotFound},
		{"malformed", ap.UUID, `{"approved":`, mesh.ErrBadRequest},
		{"no decision", ap.UUID, `{}`, mesh.ErrBadRequest},
		{"wrong type", ap.UUID, `{"approved": "sure"}`, mesh.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decide(t, m, tt.id, tt.body, ""); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	stored, _ := store.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
	if stored.Status != mesh.ApprovalPending {
		t.Errorf("a refused decision changed the approval: %s", stored.Status)
	}
}

func TestSweepEnqueuesAResumeItsDeciderDidNot(t *testing.T) {
	m := meshtest.New(t)
	cons := resumes(t, m)
	ap := stored(t, m)
	// A decider died after its decision and before the enqueue.
	if _, err := store.NewApprovalStore(m.Approvals).Decide(t.Context(), ap.UUID, mesh.Decision{Approved: true}); err != nil {
		t.Fatal(err)
	}
	start(t, m)
	msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for msg := range msgs.Messages() {
		n++
		_ = msg.Ack()
	}
	if n != 1 {
		t.Fatalf("resumes = %d, want 1", n)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		stored, _ := store.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
		return stored.ResumeEnqueued
	}, "resume not marked as enqueued")
}

// TestStopWhileStartingIsNotAFailure: a role asked to stop before it got
// going returns nil, as it does once running.
func TestStopWhileStartingIsNotAFailure(t *testing.T) {
	m := meshtest.New(t)
	a, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NS: m.NS, NodeID: "t", Logger: zerolog.Nop()}, Approvals: m.Approvals, Signer: signer(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context: %v, want nil", err)
	}
}
