package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// View is GET /ops/mesh: the mesh as the bridge sees it now.
type View struct {
	At time.Time `json:"at"`
	// DetectionMS is how long a node may stay silent before a monitor
	// marks it down (missed heartbeats and half an interval).
	DetectionMS int64 `json:"detection_ms"`
	// Nodes are every process of the mesh, live or marked down, by role
	// then node id.
	Nodes []NodeView `json:"nodes"`
	// Roles count the nodes of each role by what they look like now.
	Roles    map[string]*RoleCount `json:"roles"`
	Breakers []Breaker             `json:"breakers"`
	Queues   []Queue               `json:"queues"`
	// QueueError says why the work queues could not be read, if so.
	QueueError string `json:"queue_error,omitempty"`
	// Degradation is set while the mesh is in degradation mode.
	Degradation *mesh.Degradation `json:"degradation"`
	// Stats is the latest sample of the rates.
	Stats Sample `json:"stats"`
	// Events are the latest events of the mesh itself (node_down,
	// node_up, recovery_applied, degradation_*), newest first.
	Events []SystemEvent `json:"events"`
}

// NodeView is a node as its last heartbeat (or a monitor's down record)
// describes it, and how old that heartbeat is.
type NodeView struct {
	mesh.NodeInfo
	BeatAgeMS int64 `json:"beat_age_ms"`
	// Late: the node has not beaten for longer than the detection time,
	// and no monitor has marked it down (yet).
	Late bool `json:"late"`
}

// RoleCount counts a role's nodes.
type RoleCount struct {
	Nodes    int `json:"nodes"`
	Ready    int `json:"ready"`
	Degraded int `json:"degraded"`
	Down     int `json:"down"`
	Late     int `json:"late"`
}

// Breaker is one circuit breaker of one node.
type Breaker struct {
	Node string `json:"node"`
	Role string `json:"role"`
	// Kind is mcp (an MCP server as an agent calls it), sub_agent (an A2A
	// agent), model (a model endpoint) or other.
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	State string `json:"state"`
}

// Queue is the work queue of one agent or group.
type Queue struct {
	Role     string `json:"role"`
	Name     string `json:"name"`
	Consumer string `json:"consumer,omitempty"`
	// Messages are the work items in the stream for it: waiting or being
	// worked on (the stream keeps an item until it is acknowledged).
	Messages uint64 `json:"messages"`
	// Pending were not delivered to any worker yet.
	Pending uint64 `json:"pending"`
	// Working were delivered and not acknowledged yet.
	Working int `json:"working"`
	// Redelivered were delivered more than once and not acknowledged yet.
	Redelivered int `json:"redelivered"`
	// Pulling are the pull requests waiting: workers ready for work.
	Pulling int `json:"pulling"`
}

// nodeTable keeps the nodes bucket in memory.
type nodeTable struct {
	mu       sync.Mutex
	nodes    map[string]mesh.NodeInfo
	degraded *mesh.Degradation
}

func newNodeTable() *nodeTable { return &nodeTable{nodes: map[string]mesh.NodeInfo{}} }

// apply takes one entry of the nodes bucket: a heartbeat, a down record,
// a key gone (a clean stop, or an expired heartbeat), the degradation key.
func (t *nodeTable) apply(e jetstream.KeyValueEntry) {
	put := e.Operation() == jetstream.KeyValuePut
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Key() == mesh.DegradedKey {
		t.degraded = nil
		var d mesh.Degradation
		if put && json.Unmarshal(e.Value(), &d) == nil {
			t.degraded = &d
		}
		return
	}
	if strings.HasPrefix(e.Key(), "_") {
		return
	}
	var info mesh.NodeInfo
	if !put || json.Unmarshal(e.Value(), &info) != nil {
		delete(t.nodes, e.Key())
		return
	}
	t.nodes[e.Key()] = info
}

func (t *nodeTable) synced() {}

// snapshot copies the nodes and the degradation.
func (t *nodeTable) snapshot() ([]mesh.NodeInfo, *mesh.Degradation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]mesh.NodeInfo, 0, len(t.nodes))
	for _, n := range t.nodes {
		out = append(out, n)
	}
	return out, t.degraded
}

// meshView is the view now; views are reused within half a tick, so that
// many pages cost one read of the work queues a second.
func (s *Service) meshView(ctx context.Context) *View {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	now := s.now()
	if v := s.view; v != nil && now.Sub(v.At) < s.cfg.Tick/2 {
		return v
	}
	detection := time.Duration(s.cfg.Missed)*s.cfg.Interval + s.cfg.Interval/2
	v := &View{At: now.UTC(), DetectionMS: detection.Milliseconds(), Roles: map[string]*RoleCount{}, Breakers: []Breaker{}}
	infos, degraded := s.nodes.snapshot()
	v.Degradation = degraded
	v.Nodes = make([]NodeView, 0, len(infos))
	for _, n := range infos {
		v.Nodes = append(v.Nodes, nodeView(n, now, detection))
	}
	slices.SortFunc(v.Nodes, func(a, b NodeView) int {
		return cmp.Or(strings.Compare(a.Role, b.Role), strings.Compare(a.Node, b.Node))
	})
	for _, n := range v.Nodes {
		rc := v.Roles[n.Role]
		if rc == nil {
			rc = &RoleCount{}
			v.Roles[n.Role] = rc
		}
		rc.count(n)
		if n.State == mesh.NodeDown {
			continue // its breakers are those of a dead process
		}
		for _, name := range slices.Sorted(maps.Keys(n.Breakers)) {
			v.Breakers = append(v.Breakers, Breaker{Node: n.Node, Role: n.Role, Kind: breakerKind(name), Name: name, State: n.Breakers[name]})
		}
	}
	var err error
	v.Queues, err = s.queues(ctx)
	if err != nil {
		v.QueueError = err.Error()
	}
	v.Stats = s.stats.latest()
	v.Events = s.stats.systemEvents()
	s.view = v
	return v
}

func nodeView(n mesh.NodeInfo, now time.Time, detection time.Duration) NodeView {
	age := now.Sub(n.BeatAt)
	return NodeView{NodeInfo: n, BeatAgeMS: max(0, age.Milliseconds()), Late: n.State != mesh.NodeDown && age > detection}
}

func (rc *RoleCount) count(n NodeView) {
	rc.Nodes++
	switch {
	case n.State == mesh.NodeDown:
		rc.Down++
	case n.Late:
		rc.Late++
	case n.State == mesh.NodeDegraded:
		rc.Degraded++
	case n.State == mesh.NodeReady:
		rc.Ready++
	}
}

// breakerKind reads a breaker's name: "mcp:<server>" and "a2a:<agent>"
// as agents name them, "llm:" or "model:" for a model endpoint.
func breakerKind(name string) string {
	prefix, _, _ := strings.Cut(name, ":")
	switch prefix {
	case "mcp":
		return "mcp"
	case "a2a":
		return "sub_agent"
	case "llm", "model":
		return "model"
	}
	return "other"
}
