package heartbeat

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// TestKeyHoldsTheLatestInfo: once SetServes returns and its write is
// acknowledged, the key says what it set, however the ticks interleave (a
// tick's older info landing after it left a group seeing no live member).
func TestKeyHoldsTheLatestInfo(t *testing.T) {
	m := meshtest.New(t)
	nc := meshtest.Conn(t, m.Server.ClientURL())
	js, _ := jetstream.New(nc)
	b, err := NewBeat(BeatConfig{NC: nc, JS: js, NS: m.NS, Nodes: m.Nodes, Role: mesh.RoleAgent, NodeID: "agent-o", Interval: time.Millisecond})
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
