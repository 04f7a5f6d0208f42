package heartbeat

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// TestKeyHoldsTheLatestInfo: once SetServes returns and its write is
// acknowledged, the key says what it set, however the ticks interleave (a
// tick's older info landing after it left a group seeing no live member).
func TestKeyHoldsTheLatestInfo(t *testing.T) {
	m := meshtest.New(t)
	nc := meshtest.Conn(t, m.Server.ClientURL())
	js, _ := jetstream.New(nc)
	b, err := NewBeat(BeatConfig{Node: role.Node{NC: nc, JS: js, NS: m.NS, NodeID: "agent-o"}, Nodes: m.Nodes, Role: mesh.RoleAgent, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 300 {
		want := fmt.Sprint(i)
		b.SetServes([]string{want})
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(5 * time.Second):
			t.Fatal("heartbeat writes not acknowledged")
		}
		e, err := m.Nodes.Get(t.Context(), "agent.agent-o")
		if err != nil {
			t.Fatal(err)
		}
		var info mesh.NodeInfo
		_ = json.Unmarshal(e.Value(), &info)
		if len(info.Serves) != 1 || info.Serves[0] != want {
			t.Fatalf("after SetServes(%s) the key serves %v", want, info.Serves)
		}
	}
}

// TestBeatsCarryTheAgents: every beat asks again what the node says of its
// agents, so the key follows their busy workers.
func TestBeatsCarryTheAgents(t *testing.T) {
	m := meshtest.New(t)
	nc := meshtest.Conn(t, m.Server.ClientURL())
	js, _ := jetstream.New(nc)
	b, err := NewBeat(BeatConfig{Node: role.Node{NC: nc, JS: js, NS: m.NS, NodeID: "agent-i"}, Nodes: m.Nodes, Role: mesh.RoleAgent, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var busy atomic.Int32
	b.SetAgents(func() []mesh.AgentInfo {
		return []mesh.AgentInfo{{Name: "writer", Tools: []string{"resources_list"}, Workers: 3, Busy: int(busy.Load())}}
	})
	for _, want := range []int32{0, 2, 3} {
		busy.Store(want)
		deadline := time.Now().Add(5 * time.Second)
		for {
			e, err := m.Nodes.Get(t.Context(), "agent.agent-i")
			var info mesh.NodeInfo
			if err == nil {
				_ = json.Unmarshal(e.Value(), &info)
			}
			if len(info.Agents) == 1 && info.Agents[0].Busy == int(want) && info.Agents[0].Workers == 3 && info.Agents[0].Tools[0] == "resources_list" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the key says %+v, want writer with %d of 3 workers busy", info.Agents, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
