package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
)

// CodeSlowConsumer ends a stream whose client fell too far behind.
const CodeSlowConsumer = "SLOW_CONSUMER"

// CodeTokenExpired ends a stream whose credential (a stream token, a JWT)
// expired: the client opens it again with a fresh token, after the last
// event it got. A run goes on.
const CodeTokenExpired = "TOKEN_EXPIRED"

// events serves GET /conversations/{id}/events: the conversation's AG-UI
// events as stored, each with "id: <stream sequence>", from the start or
// after Last-Event-ID (or ?after=), then live ones until the client leaves.
// They come as a sequence of runs, as AG-UI clients verify one
// ([runSequence]).
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := lastEventID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// A deleted conversation's events stay readable (its tombstone).
	if _, err := h.core.TombstoneFor(r.Context(), id, core.CallerOf(r)); err != nil {
		writeError(w, err)
		return
	}
	// A follower of a queued turn whose work item was lost would wait for
	// good: it is repaired first.
	h.core.CheckQueued(r.Context(), id, core.CallerOf(r))
	closeStream, opened := h.acquire(w, r)
	if !opened {
		return
	}
	defer closeStream()
	f, err := h.core.Follow(r.Context(), id, after)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	out := sse.New(w).Observe(r, "events")
	if err := out.Start(nil); err != nil {
		return
	}
	if err := out.Retry(1000); err != nil {
		return
	}
	runs := runSequence{thread: id}
	for {
		ev, err := h.next(r.Context(), f, out)
		if errors.Is(err, core.ErrSlowConsumer) {
			out.CutOff()
			// No id: the client resumes after the last event it did get.
			data, _ := json.Marshal(mesh.RunError(CodeSlowConsumer, "the client did not keep up; reconnect with Last-Event-ID to resume"))
			_ = out.Event(0, data)
			return
		}
		if errors.Is(err, core.ErrCredentialExpired) {
			data, _ := json.Marshal(mesh.RunError(CodeTokenExpired, "the token of this stream expired; reconnect with a fresh token and Last-Event-ID to resume"))
			_ = out.Event(0, data)
			return
		}
		if err != nil {
			return
		}
		before, send, after := runs.next(ev)
		if !writeEvents(out, before) {
			return
		}
		if send {
			if err := out.Event(ev.Seq, ev.Data); err != nil {
				return
			}
		}
		if !writeEvents(out, after) {
			return
		}
	}
}

// writeEvents sends events the bridge wrote, with no id: a client resumes
// after the stored events it got.
func writeEvents(out *sse.Writer, evs []mesh.Event) bool {
	for _, e := range evs {
		data, err := json.Marshal(e)
		if err != nil || out.Event(0, data) != nil {
			return false
		}
	}
	return true
}

// lastEventID reads where a client resumes: the Last-Event-ID header of an
// SSE reconnection, or ?after=.
func lastEventID(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, mesh.ErrBadRequest.With(fmt.Sprintf("Last-Event-ID %s is not an event id (a stream sequence number)", mesh.Clip(v)))
	}
	return n, nil
}

func writeError(w http.ResponseWriter, err error) { core.WriteError(w, err) }
