package ops

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// Sample is the mesh's rates over one tick.
type Sample struct {
	At time.Time `json:"at"`
	// Events is the events per second the mesh published (every AG-UI
	// event of every conversation, and the mesh's own), from the events
	// stream's last sequence at each tick.
	Events float64 `json:"events_per_s"`
	// Turns is the runs per second that ended (RUN_FINISHED or RUN_ERROR:
	// a turn, a resume after a decision, a group round).
	Turns float64 `json:"turns_per_s"`
	// P95MS is the 95th percentile of the time from an agent's
	// RUN_STARTED to the run's end, over the runs that ended in the last
	// minute; 0 when none did.
	P95MS float64 `json:"p95_turn_ms"`
	// Approvals is how many approvals wait for a person.
	Approvals int `json:"approvals_waiting"`
}

// SystemEvent is an event of the mesh itself (mesh.evt._mesh.CUSTOM).
type SystemEvent struct {
	At   time.Time `json:"at"`
	Name string    `json:"name"`
	// Node and Role name the node it is about, when it is about one.
	Node   string `json:"node,omitempty"`
	Role   string `json:"role,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Bounds of what the sampler remembers.
const (
	p95Window     = time.Minute
	maxStarted    = 10000 // runs started and not ended, timed
	maxSystemKept = 50
)

// sampler counts the events the mesh published and the runs that ended,
// times runs, and keeps one sample a tick.
type sampler struct {
	size int

	mu     sync.Mutex
	events int
	// seq is the events stream's last sequence at the last reading, if
	// read.
	seq      uint64
	read     bool
	turns    int
	last     time.Time
	started  map[string]time.Time // run id → its RUN_STARTED
	ended    []timed              // runs ended within p95Window, oldest first
	samples  []Sample             // ring, oldest first once full
	next     int
	system   []SystemEvent // newest last
	clockNow func() time.Time
}

type timed struct {
	at  time.Time
	dur time.Duration
}

func newSampler(size int) *sampler {
	return &sampler{size: size, started: map[string]time.Time{}, clockNow: time.Now}
}

// observe takes one event from the hub's tap (a run's start or end, an
// event of the mesh itself); it only counts and remembers.
func (s *sampler) observe(ev core.StreamEvent) {
	now := s.clockNow()
	var sys *SystemEvent
	if ev.Session == mesh.SystemSession && ev.Type == mesh.EventCustom {
		sys = systemEvent(ev.Data, now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case mesh.EventRunStarted:
		if ev.Run != "" && len(s.started) < maxStarted {
			s.started[ev.Run] = now
		}
	case mesh.EventRunFinished, mesh.EventRunError:
		s.turns++
		if t, ok := s.started[ev.Run]; ok {
			delete(s.started, ev.Run)
			s.ended = append(s.ended, timed{at: now, dur: now.Sub(t)})
		}
	}
	if sys != nil {
		s.system = append(s.system, *sys)
		if len(s.system) > maxSystemKept {
			s.system = slices.Delete(s.system, 0, len(s.system)-maxSystemKept)
		}
	}
}

// systemEvent reads a CUSTOM event of the monitor: {name, value}, the
// value a node (node_up), or {node, reason} (node_down).
func systemEvent(data []byte, now time.Time) *SystemEvent {
	var ev struct {
		Name  string `json:"name"`
		Value struct {
			Node   json.RawMessage `json:"node"`
			Role   string          `json:"role"`
			Reason string          `json:"reason"`
		} `json:"value"`
		Timestamp int64 `json:"timestamp"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Name == "" {
		return nil
	}
	out := &SystemEvent{At: now.UTC(), Name: ev.Name, Role: ev.Value.Role, Reason: ev.Value.Reason}
	var nested mesh.NodeInfo
	if json.Unmarshal(ev.Value.Node, &out.Node) != nil && json.Unmarshal(ev.Value.Node, &nested) == nil {
		out.Node, out.Role = nested.Node, nested.Role
	}
	if ev.Timestamp > 0 {
		out.At = time.UnixMilli(ev.Timestamp).UTC()
	}
	return out
}

// published takes a reading of the events stream's last sequence: the
// events published since the last reading count in the current tick. A
// sequence that went back (the stream was made again) starts the count
// anew.
func (s *sampler) published(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read && seq >= s.seq {
		s.events += int(seq - s.seq)
	}
	s.seq, s.read = seq, true
}

// start opens the first tick.
func (s *sampler) start(now time.Time) {
	s.mu.Lock()
	s.last = now
	s.mu.Unlock()
}

// take closes the tick that ends at now.
func (s *sampler) take(now time.Time, approvals int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	secs := max(now.Sub(s.last).Seconds(), 0.001)
	s.last = now
	cut := 0
	for cut < len(s.ended) && now.Sub(s.ended[cut].at) > p95Window {
		cut++
	}
	s.ended = slices.Delete(s.ended, 0, cut)
	sample := Sample{At: now.UTC(), Events: float64(s.events) / secs, Turns: float64(s.turns) / secs, P95MS: p95(s.ended), Approvals: approvals}
	s.events, s.turns = 0, 0
	if len(s.samples) < s.size {
		s.samples = append(s.samples, sample)
		return
	}
	s.samples[s.next] = sample
	s.next = (s.next + 1) % s.size
}

// p95 is the 95th percentile of the durations, in milliseconds (nearest
// rank).
func p95(ended []timed) float64 {
	if len(ended) == 0 {
		return 0
	}
	d := make([]time.Duration, len(ended))
	for i, e := range ended {
		d[i] = e.dur
	}
	slices.Sort(d)
	rank := (95*len(d) + 99) / 100
	return float64(d[rank-1].Microseconds()) / 1000
}

// history is every sample kept, oldest first.
func (s *sampler) history() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, len(s.samples))
	out = append(out, s.samples[s.next:]...)
	return append(out, s.samples[:s.next]...)
}

// latest is the last sample; zero before the first tick.
func (s *sampler) latest() Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return Sample{}
	}
	i := len(s.samples) - 1
	if len(s.samples) == s.size {
		i = (s.next + s.size - 1) % s.size
	}
	return s.samples[i]
}

// systemEvents are the mesh's own events, newest first.
func (s *sampler) systemEvents() []SystemEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.system)
	slices.Reverse(out)
	if out == nil {
		out = []SystemEvent{}
	}
	return out
}
