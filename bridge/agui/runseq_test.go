package agui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// stored is an event as the events stream holds it, with the run of its
// Mesh-Run header.
func stored(seq uint64, run string, e mesh.Event) core.StreamEvent {
	data, _ := json.Marshal(e)
	return core.StreamEvent{Seq: seq, Run: run, Type: e.Type, Data: data}
}

// sequence runs events through a runSequence and names what it sends:
// TYPE[/name][(why)][#seq] for a stored event, without # for one it wrote.
func sequence(evs ...core.StreamEvent) string {
	s := runSequence{thread: "c1"}
	var out []string
	name := func(e mesh.Event, seq uint64) string {
		n := string(e.Type)
		if e.Type == mesh.EventCustom {
			n += "/" + e.Name
		}
		if e.Type == mesh.EventRunStarted || e.Type == mesh.EventRunFinished {
			n += ":" + e.RunID
		}
		if w := e.WrittenBy(); w != "" {
			n += "(" + w + ")"
		}
		if seq != 0 {
			n += "#"
		}
		return n
	}
	for _, ev := range evs {
		before, send, after := s.next(ev)
		for _, e := range before {
			out = append(out, name(e, 0))
		}
		if send {
			var e mesh.Event
			_ = json.Unmarshal(ev.Data, &e)
			out = append(out, name(e, ev.Seq))
		}
		for _, e := range after {
			out = append(out, name(e, 0))
		}
	}
	return strings.Join(out, " ")
}

func TestRunSequenceOpensEveryRunOnce(t *testing.T) {
	success := mesh.Outcome{Type: mesh.OutcomeSuccess}
	interrupt := mesh.Outcome{Type: mesh.OutcomeInterrupt}
	queued := mesh.Custom(mesh.CustomRunQueued, map[string]any{"runId": "r1", "message": "hi"})
	decided := mesh.Custom(mesh.CustomApprovalDecided, map[string]any{"uuid": "a1", "status": "approved"})
	feedback := mesh.Custom(mesh.CustomFeedback, map[string]any{"messageId": "m1", "rating": "like"})
	text := mesh.Event{Type: mesh.EventTextMessageContent, MessageID: "m1", Delta: "x"}
	for _, tc := range []struct {
		name string
		in   []core.StreamEvent
		want string
	}{{
		name: "a queued turn starts where it was queued, once",
		in: []core.StreamEvent{
			stored(1, "r1", queued), stored(2, "r1", mesh.RunStarted("c1", "r1")), stored(3, "r1", text),
			stored(4, "r1", mesh.RunFinished("c1", "r1", interrupt, nil)),
		},
		want: "RUN_STARTED:r1(queued) CUSTOM/run_queued# TEXT_MESSAGE_CONTENT# RUN_FINISHED:r1#",
	}, {
		name: "a resume starts where its approval was decided",
		in: []core.StreamEvent{
			stored(5, "", decided), stored(6, "a1", mesh.RunStarted("c1", "a1")), stored(7, "a1", text),
			stored(8, "a1", mesh.RunFinished("c1", "a1", success, nil)),
		},
		want: "RUN_STARTED:a1(decided) CUSTOM/approval_decided# TEXT_MESSAGE_CONTENT# RUN_FINISHED:a1#",
	}, {
		name: "a rating comes in a run of its own",
		in:   []core.StreamEvent{stored(9, "", feedback)},
		want: "RUN_STARTED:feedback-9(envelope) CUSTOM/feedback# RUN_FINISHED:feedback-9(envelope)",
	}, {
		name: "read from the middle of a run, the run is opened first",
		in:   []core.StreamEvent{stored(3, "r1", text), stored(4, "r1", mesh.RunFinished("c1", "r1", success, nil))},
		want: "RUN_STARTED:r1(resumed) TEXT_MESSAGE_CONTENT# RUN_FINISHED:r1#",
	}, {
		name: "a run that never ended is closed before the next",
		in: []core.StreamEvent{
			stored(1, "r1", mesh.RunStarted("c1", "r1")), stored(2, "r1", text), stored(3, "r2", mesh.RunStarted("c1", "r2")),
		},
		want: "RUN_STARTED:r1# TEXT_MESSAGE_CONTENT# RUN_FINISHED:r1(unfinished) RUN_STARTED:r2#",
	}, {
		name: "a late fact of an ended run does not reopen it",
		in: []core.StreamEvent{
			stored(1, "r1", mesh.RunStarted("c1", "r1")), stored(2, "r1", mesh.RunFinished("c1", "r1", success, nil)),
			stored(3, "r1", mesh.Event{Type: mesh.EventStateDelta, Delta: []mesh.PatchOp{}}),
			stored(4, "r1", mesh.Event{Type: mesh.EventStateDelta, Delta: []mesh.PatchOp{}}),
		},
		want: "RUN_STARTED:r1# RUN_FINISHED:r1# RUN_STARTED:STATE_DELTA-3(envelope) STATE_DELTA# RUN_FINISHED:STATE_DELTA-3(envelope) " +
			"RUN_STARTED:STATE_DELTA-4(envelope) STATE_DELTA# RUN_FINISHED:STATE_DELTA-4(envelope)",
	}, {
		name: "a queued turn lost before the stream opened ends in a run",
		in:   []core.StreamEvent{stored(7, "r1", mesh.RunError(mesh.CodeTurnLost, "lost"))},
		want: "RUN_STARTED:r1(resumed) RUN_ERROR#",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sequence(tc.in...); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
