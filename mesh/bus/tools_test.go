package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
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
	res, err := bus.CallToolWatched(t.Context(), m.NC, m.NS, m.Nodes, "srv", "slow", mesh.ToolRequest{CallID: "c-1"}, nil)
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
	_, err = bus.CallToolWatched(t.Context(), m.NC, m.NS, m.Nodes, "srv", "none", mesh.ToolRequest{CallID: "c-2"}, nil)
	if !errors.Is(err, mesh.ErrToolUnavailable) || !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("err = %v, want unavailable with no responders", err)
	}
}

// A result lost while the caller's connection moved to another server (a
// cluster node died) is not waited for: after the reconnection the call
// goes again with the same call id, which a live toolhost answers.
func TestCallToolWatchedResendsAfterAReconnection(t *testing.T) {
	m := meshtest.New(t)
	if _, err := m.Nodes.Put(t.Context(), "toolhost.alive", []byte(`{"node":"alive","role":"toolhost","state":"ready"}`)); err != nil {
		t.Fatal(err)
	}
	host := meshtest.Conn(t, m.Server.ClientURL())
	caller := meshtest.Conn(t, m.Server.ClientURL())
	var attempts atomic.Int32
	taken := make(chan struct{}, 1)
	sub, err := host.Subscribe("mesh.tool.srv.lost", func(msg *nats.Msg) {
		ack := nats.NewMsg(msg.Reply)
		ack.Header.Set(mesh.HeaderCallHost, "alive")
		_ = host.PublishMsg(ack)
		if attempts.Add(1) == 1 {
			taken <- struct{}{} // and the result is lost on the way
			return
		}
		data, _ := json.Marshal(mesh.ToolResult{Text: "done"})
		_ = msg.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = host.Flush()
	go func() {
		<-taken
		_ = caller.ForceReconnect()
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := bus.CallToolWatched(ctx, caller, m.NS, m.Nodes, "srv", "lost", mesh.ToolRequest{CallID: "c-3"}, nil)
	if err != nil || res.Text != "done" {
		t.Fatalf("call = %+v, %v after %s", res, err, time.Since(start))
	}
	if attempts.Load() != 2 {
		t.Errorf("attempts = %d, want 2", attempts.Load())
	}
	// Not the resend of a call nobody took (5 s): the reconnection's.
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("took %s to send the call again after the reconnection", took)
	}
}

// A toolhost whose own connection moved to another server after it took a
// call cannot reply (the new server did not see the request): its
// heartbeat counts the move, and the caller sends the call again.
func TestCallToolWatchedResendsWhenItsToolhostMoved(t *testing.T) {
	m := meshtest.New(t)
	put := func(reconnects int) {
		t.Helper()
		info := fmt.Sprintf(`{"node":"mover","role":"toolhost","state":"ready","reconnects":%d}`, reconnects)
		if _, err := m.Nodes.Put(t.Context(), "toolhost.mover", []byte(info)); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	host := meshtest.Conn(t, m.Server.ClientURL())
	var attempts atomic.Int32
	sub, err := host.Subscribe("mesh.tool.srv.moved", func(msg *nats.Msg) {
		ack := nats.NewMsg(msg.Reply)
		ack.Header.Set(mesh.HeaderCallHost, "mover")
		_ = host.PublishMsg(ack)
		if attempts.Add(1) == 1 {
			go func() {
				time.Sleep(1500 * time.Millisecond) // the caller has seen the count of 0
				put(1)                              // moved: the result is refused
			}()
			return
		}
		data, _ := json.Marshal(mesh.ToolResult{Text: "done"})
		_ = msg.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = host.Flush()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := bus.CallToolWatched(ctx, m.NC, m.NS, m.Nodes, "srv", "moved", mesh.ToolRequest{CallID: "c-4"}, nil)
	if err != nil || res.Text != "done" || attempts.Load() != 2 {
		t.Fatalf("call = %+v, %v after %d attempts", res, err, attempts.Load())
	}
}
