package group

import (
	"encoding/json"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
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

// TestOlderEntryDoesNotUndoANewerOne: a reload's read that lands after the
// watch applied a newer entry (here, the node's removal) changes nothing.
func TestOlderEntryDoesNotUndoANewerOne(t *testing.T) {
	m := meshtest.New(t)
	info := mesh.NodeInfo{Node: "a-1", Role: mesh.RoleAgent, State: mesh.NodeReady, Serves: []string{"alpha"}}
	data, _ := json.Marshal(info)
	if _, err := m.Nodes.Put(t.Context(), info.Key(), data); err != nil {
		t.Fatal(err)
	}
	old, err := m.Nodes.Get(t.Context(), info.Key())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Nodes.Delete(t.Context(), info.Key()); err != nil {
		t.Fatal(err)
	}
	l := newLiveness(m.Nodes)
	ready := make(chan struct{})
	if _, err := store.WatchKV(t.Context(), m.Nodes, store.KVWatch{Keys: mesh.RoleAgent + ".*", Apply: l.apply, Synced: func() { close(ready) }}); err != nil {
		t.Fatal(err)
	}
	<-ready
	l.apply(old)
	if l.serves("alpha") {
		t.Error("an older entry brought back a node the bucket had removed")
	}
}
