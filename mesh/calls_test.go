package mesh_test

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// A call taken by a toolhost that dies is sent again to a live one.
func TestCallToolWatchedResendsWhenItsToolhostDies(t *testing.T) {
	m := meshtest.New(t)
	if _, err := m.Nodes.Put(t.Context(), "toolhost.alive", []byte(`{"node":"alive","role":"toolhost","state":"ready"}`)); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	sub, err := m.NC.QueueSubscribe("mesh.tool.srv.slow", "q", func(msg *nats.Msg) {
		n := attempts.Add(1)
		ack := nats.NewMsg(msg.Reply)
		if msg.Header.Get(mesh.HeaderCallAck) == "" {
			t.Error("the call did not ask for an acknowledgement")
		}
		if n == 1 {
			// Taken by a host that then dies without answering (it has no
			// key in the nodes bucket).
			ack.Header.Set(mesh.HeaderCallHost, "dead")
			_ = m.NC.PublishMsg(ack)
			return
		}
		ack.Header.Set(mesh.HeaderCallHost, "alive")
		_ = m.NC.PublishMsg(ack)
		var req mesh.ToolRequest
		_ = json.Unmarshal(msg.Data, &req)
		data, _ := json.Marshal(mesh.ToolResult{Text: "done " + req.CallID})
		_ = msg.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	start := time.Now()
	res, err := mesh.CallToolWatched(t.Context(), m.NC, m.NS, m.Nodes, "srv", "slow", mesh.ToolRequest{CallID: "c-1"}, nil)
	if err != nil || res.Text != "done c-1" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	if attempts.Load() != 2 {
		t.Errorf("attempts = %d, want 2: one to the dead host, one to a live one", attempts.Load())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to notice the dead toolhost", took)
	}

	// No toolhost at all is said at once.
	_, err = mesh.CallToolWatched(t.Context(), m.NC, m.NS, m.Nodes, "srv", "none", mesh.ToolRequest{CallID: "c-2"}, nil)
	if !errors.Is(err, mesh.ErrToolUnavailable) || !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("err = %v, want unavailable with no responders", err)
	}
}
