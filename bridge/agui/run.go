package agui

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// runStream is one run followed by the client that started it.
type runStream struct {
	h       *handler
	f       *core.Follower
	session string
	runID   string
	started time.Time
	// release, when set, gives the stream slot back on close.
	release func()
}

// startRun follows the conversation's new events, then starts a run with
// start (a message or a decision). Errors come before any byte of the stream,
// so the caller can still answer them with a status.
func (h *handler) startRun(ctx context.Context, session string, start func() (*core.Run, error)) (*runStream, error) {
	f, err := h.core.Follow(ctx, session, core.FromNow)
	if err != nil {
		return nil, err
	}
	run, err := start()
	if err != nil {
		f.Close()
		return nil, err
	}
	// The stream, not the run's waiter, tells this client when the run ends.
	run.Close()
	return &runStream{h: h, f: f, session: session, runID: run.ID, started: time.Now()}, nil
}

func (rs *runStream) close() {
	rs.f.Close()
	if rs.release != nil {
		rs.release()
	}
}

// errEnded is returned by each when the run ended.
var errEnded = errors.New("agui: run ended")

// each calls fn with every event of the run, in order, until the run's
// RUN_FINISHED or RUN_ERROR (given to fn too). Events that belong to no run
// (approval_decided) are given as well. tick runs every interval. When ctx
// ends first (the client left), the run is cancelled.
func (rs *runStream) each(ctx context.Context, interval time.Duration, tick func() error, fn func(core.StreamEvent, *mesh.Event) error) error {
	nextTick := time.Now().Add(interval)
	for {
		wait, cancel := context.WithDeadline(ctx, nextTick)
		sev, err := rs.f.Next(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			rs.cancelRun()
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			nextTick = time.Now().Add(interval)
			if err := tick(); err != nil {
				rs.cancelRun()
				return err
			}
			continue
		case err != nil:
			return err
		}
		if !ofRun(sev, rs.runID) {
			continue
		}
		var ev mesh.Event
		if err := json.Unmarshal(sev.Data, &ev); err != nil {
			continue
		}
		if err := fn(sev, &ev); err != nil {
			rs.cancelRun()
			return err
		}
		if sev.Run == rs.runID && (ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventRunError) {
			return errEnded
		}
	}
}

// cancelRun stops the run the client no longer waits for.
func (rs *runStream) cancelRun() {
	// The client's request is over: the cancel gets a context of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rs.h.core.Cancel(ctx, rs.session, rs.runID); err != nil {
		rs.h.log.Warn().Err(err).Str("session", rs.session).Msg("cancel run of a departed client")
	}
}
