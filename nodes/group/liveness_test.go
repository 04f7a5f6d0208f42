package group

import (
	"encoding/json"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// TestReloadSeesWhatTheWatchHasNotYet: a liveness that has not heard of a
// node (its watch lags, or has not started) finds it by rereading the
// bucket, and a node marked down stays not serving.
func TestReloadSeesWhatTheWatchHasNotYet(t *testing.T) {
	m := meshtest.New(t)
	for _, info := range []mesh.NodeInfo{
		{Node: "a-1", Role: mesh.RoleAgent, State: mesh.NodeReady, Serves: []string{"alpha"}},
		{Node: "a-2", Role: mesh.RoleAgent, State: mesh.NodeDown, Serves: []string{"beta"}},
		{Node: "g-1", Role: mesh.RoleGroup, State: mesh.NodeReady, Serves: []string{"gamma"}},
	} {
		data, _ := json.Marshal(info)
		if _, err := m.Nodes.Put(t.Context(), info.Key(), data); err != nil {
			t.Fatal(err)
		}
	}
	l := newLiveness(m.Nodes)
	if l.serves("alpha") {
		t.Fatal("serves alpha before reading anything")
	}
	if err := l.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	for agent, want := range map[string]bool{"alpha": true, "beta": false, "gamma": false} {
		if got := l.serves(agent); got != want {
			t.Errorf("serves(%s) = %v, want %v", agent, got, want)
		}
	}
}
