package store_test

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Work items a release before 0.1.0 queued on mesh.work.<role>.<name>
// are moved by provisioning to mesh.work.<role>.<name>.<session>, with
// their headers and in order, even when their own message id is still in
// the duplicate window; one naming no conversation stays where it is.
func TestProvisionMovesWorkItemsAnOlderReleaseQueued(t *testing.T) {
	m := meshtest.New(t)
	ctx := t.Context()
	work, err := m.JS.Stream(ctx, m.NS.Stream(mesh.StreamWork))
	if err != nil {
		t.Fatal(err)
	}
	// The stream as the older release made it: mesh.work.>.
	cfg := work.CachedInfo().Config
	cfg.Subjects = []string{m.NS.Prefix() + ".work.>"}
	if _, err := m.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	session := mesh.NewID()
	queue := func(item mesh.WorkItem, id string) {
		t.Helper()
		msg := nats.NewMsg("mesh.work.agent.clerk")
		msg.Data, _ = json.Marshal(item)
		msg.Header.Set(jetstream.MsgIDHeader, id)
		msg.Header.Set(mesh.HeaderAuthorization, "Bearer t")
		if _, err := m.JS.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	queue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: session, TurnID: "t1", Message: "first"}, "turn:t1")
	queue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: "not a token", TurnID: "t2"}, "turn:t2")
	queue(mesh.WorkItem{Kind: mesh.WorkResume, Session: session, TurnID: "t3", ApprovalID: "t3"}, "resume:t3")

	for range 2 { // a second provision moves nothing more
		if _, err := store.Provision(ctx, m.JS, m.NS, store.ProvisionConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	left, err := store.LegacyWork(ctx, m.NS, work)
	if err != nil || len(left) != 1 || left["mesh.work.agent.clerk"] != 1 {
		t.Fatalf("items left on the old subject: %v, %v; want the one naming no conversation", left, err)
	}
	var got []string
	for seq := uint64(1); ; {
		msg, err := work.GetMsg(ctx, seq, jetstream.WithGetMsgSubject("mesh.work.agent.clerk."+session))
		if err != nil {
			break
		}
		seq = msg.Sequence + 1
		var item mesh.WorkItem
		_ = json.Unmarshal(msg.Data, &item)
		if msg.Header.Get(mesh.HeaderAuthorization) != "Bearer t" {
			t.Errorf("item %s lost its headers: %v", item.TurnID, msg.Header)
		}
		got = append(got, item.TurnID)
	}
	if len(got) != 2 {
		t.Fatalf("moved items %v, want t1 then t3, once each", got)
	}
	if got[0] != "t1" || got[1] != "t3" {
		t.Errorf("moved items %v, want t1 then t3", got)
	}
}
