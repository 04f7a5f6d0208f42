package approver

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

func start(t *testing.T, m *meshtest.Mesh) {
	t.Helper()
	a, err := New(Config{NC: m.NC, JS: m.JS, NS: m.NS, Approvals: m.Approvals, NodeID: "t", SweepInterval: 50 * time.Millisecond, Grace: 100 * time.Millisecond, Logger: zerolog.Nop()})
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

func pending(t *testing.T, m *meshtest.Mesh) *mesh.Approval {
	t.Helper()
	ap := &mesh.Approval{UUID: mesh.NewID(), ConversationID: mesh.NewID(), SessionID: "abcd1234", Agent: "tester", RunID: "r", ToolCallID: "c", ToolName: "danger", ToolArgs: map[string]any{"x": 1}}
	if err := mesh.NewApprovalStore(m.Approvals).Create(t.Context(), ap); err != nil {
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
	c, err := m.JS.CreateOrUpdateConsumer(t.Context(), m.NS.Stream(mesh.StreamWork), jetstream.ConsumerConfig{Durable: "agent_tester", FilterSubject: "mesh.work.agent.tester", AckPolicy: jetstream.AckExplicitPolicy})
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
			stored, _ := mesh.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
			if !stored.ResumeEnqueued {
				t.Error("resume not marked as enqueued")
			}
		})
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
	stored, _ := mesh.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
	if stored.Status != mesh.ApprovalPending {
		t.Errorf("a refused decision changed the approval: %s", stored.Status)
	}
}

func TestSweepEnqueuesAResumeItsDeciderDidNot(t *testing.T) {
	m := meshtest.New(t)
	cons := resumes(t, m)
	ap := pending(t, m)
	// A decider died after its decision and before the enqueue.
	if _, err := mesh.NewApprovalStore(m.Approvals).Decide(t.Context(), ap.UUID, mesh.Decision{Approved: true}); err != nil {
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
		stored, _ := mesh.NewApprovalStore(m.Approvals).Get(t.Context(), ap.UUID)
		return stored.ResumeEnqueued
	}, "resume not marked as enqueued")
}

// TestStopWhileStartingIsNotAFailure: a role asked to stop before it got
// going returns nil, as it does once running.
func TestStopWhileStartingIsNotAFailure(t *testing.T) {
	m := meshtest.New(t)
	a, err := New(Config{NC: m.NC, JS: m.JS, NS: m.NS, Approvals: m.Approvals, NodeID: "t", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context: %v, want nil", err)
	}
}
