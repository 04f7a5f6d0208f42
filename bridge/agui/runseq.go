package agui

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// runSequence turns a conversation's stored events into a sequence of
// AG-UI runs as AG-UI clients verify one: every event between a run's
// RUN_STARTED and its RUN_FINISHED or RUN_ERROR, one run at a time.
//
// The stored stream holds facts of no run: the bridge's run_queued comes
// before the agent's RUN_STARTED (a follower must see a queued turn before
// any agent takes it), an approver's approval_decided between the interrupt
// and the resume, a rating whenever it is given. Rather than reorder the
// stored stream (or delay a fact until the next run), the view opens the run
// such a fact starts, or wraps it in a run of its own. What it writes carries
// no SSE id, so Last-Event-ID stays the stored sequence.
type runSequence struct {
	thread string
	open   string // the run between its start and its end, "" between runs
	ended  string // the last run that ended
}

// seen is what the view reads of an event: a run's id, a CUSTOM event's
// name, and the ids its value carries (run_queued's run, approval_decided's
// approval).
type seen struct {
	RunID string `json:"runId"`
	Name  string `json:"name"`
	Value struct {
		RunID      string `json:"runId"`
		UUID       string `json:"uuid"`
		Regenerate bool   `json:"regenerate"`
	} `json:"value"`
}

// next returns the events to send before ev, whether ev is sent, and the
// events to send after it.
func (s *runSequence) next(ev core.StreamEvent) (before []mesh.Event, send bool, after []mesh.Event) {
	var e seen
	switch ev.Type {
	case mesh.EventRunStarted:
		_ = json.Unmarshal(ev.Data, &e)
		if e.RunID != "" && e.RunID == s.open {
			return nil, false, nil // opened at its queueing or decision
		}
		if s.open != "" {
			before = append(before, s.end(mesh.RunWrittenUnfinished))
		}
		s.open = e.RunID
		if s.open == "" {
			s.open = ev.Run
		}
		return before, true, nil
	case mesh.EventRunFinished, mesh.EventRunError:
		_ = json.Unmarshal(ev.Data, &e)
		if s.open == "" {
			before = append(before, s.start(cmp.Or(e.RunID, ev.Run, fmt.Sprintf("event-%d", ev.Seq)), mesh.RunWrittenResumed, nil))
		}
		s.ended, s.open = cmp.Or(e.RunID, ev.Run, s.open), ""
		return before, true, nil
	}
	if s.open != "" {
		return nil, true, nil
	}
	if ev.Run != "" && ev.Run == s.ended {
		// A fact of a run that has ended (a late write): not a new run.
		return s.envelope(ev, string(ev.Type))
	}
	if ev.Type != mesh.EventCustom {
		if ev.Run == "" {
			return s.envelope(ev, string(ev.Type))
		}
		s.open = ev.Run
		return []mesh.Event{s.start(ev.Run, mesh.RunWrittenResumed, nil)}, true, nil
	}
	// A value of another shape leaves e.Value empty, the name read.
	_ = json.Unmarshal(ev.Data, &e)
	v := e.Value
	switch {
	case e.Name == mesh.CustomRunQueued && v.RunID != "":
		s.open = v.RunID
		var extra map[string]any
		if v.Regenerate {
			extra = map[string]any{"regenerate": true}
		}
		return []mesh.Event{s.start(v.RunID, mesh.RunWrittenQueued, extra)}, true, nil
	case e.Name == mesh.CustomApprovalDecided && v.UUID != "":
		s.open = v.UUID
		return []mesh.Event{s.start(v.UUID, mesh.RunWrittenDecided, nil)}, true, nil
	case ev.Run != "":
		s.open = ev.Run
		return []mesh.Event{s.start(ev.Run, mesh.RunWrittenResumed, nil)}, true, nil
	}
	return s.envelope(ev, e.Name)
}

// envelope wraps one event of no run in a run of its own.
func (s *runSequence) envelope(ev core.StreamEvent, name string) ([]mesh.Event, bool, []mesh.Event) {
	ended := s.ended
	s.open = fmt.Sprintf("%s-%d", cmp.Or(name, "event"), ev.Seq)
	start := s.start(s.open, mesh.RunWrittenEnvelope, nil)
	end := s.end(mesh.RunWrittenEnvelope)
	s.ended = ended
	return []mesh.Event{start}, true, []mesh.Event{end}
}

func (s *runSequence) start(run, why string, extra map[string]any) mesh.Event {
	meta := map[string]any{mesh.MetaWrittenBy: why}
	for k, v := range extra {
		meta[k] = v
	}
	e := mesh.RunStarted(s.thread, run)
	e.Metadata = meta
	return e
}

// end closes the open run with the outcome success: the bridge does not
// know another, and the metadata says the bridge wrote it.
func (s *runSequence) end(why string) mesh.Event {
	e := mesh.RunFinished(s.thread, s.open, mesh.Outcome{Type: mesh.OutcomeSuccess}, nil)
	e.Metadata = map[string]any{mesh.MetaWrittenBy: why}
	s.ended, s.open = s.open, ""
	return e
}
