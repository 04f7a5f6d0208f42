package agui

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// The runs and follows of a socket (socket.go): each a goroutine of the
// socket that reads a follower and sends frames.

// runCursor is where a client is in a run: the mesh's run id (a resume's
// differs from the client's runId), the stream sequence the run started
// after, and the last sequence the client got. It travels as
// "<run>.<from>.<seq>" (ids hold no dot).
type runCursor struct {
	run       string
	from, seq uint64
}

func (c runCursor) String() string {
	return c.run + "." + strconv.FormatUint(c.from, 10) + "." + strconv.FormatUint(c.seq, 10)
}

func parseCursor(s string) (runCursor, error) {
	bad := mesh.ErrBadRequest.With(`"cursor" ` + mesh.Clip(s) + ` is not a cursor of this socket's frames`)
	parts := strings.Split(s, ".")
	if len(parts) != 3 || mesh.CheckID(parts[0]) != nil {
		return runCursor{}, bad
	}
	from, err1 := strconv.ParseUint(parts[1], 10, 64)
	seq, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || seq < from {
		return runCursor{}, bad
	}
	return runCursor{run: parts[0], from: from, seq: seq}, nil
}

// startRun starts the run a RunAgentInput asks for, as POST /agui does,
// and sends its frames from RUN_STARTED on.
func (c *socket) startRun(in *runAgentInput) error {
	if p, err := in.action(); err == nil && p.Action == actionFeedback {
		return c.feedbackRunFrame(in, p)
	}
	dest, start, err := c.h.starter(c.ctx, in, c.caller)
	if err != nil {
		return err
	}
	thread, runID := *in.ThreadID, *in.RunID
	sub, err := c.subscribe(thread)
	if err != nil {
		return err
	}
	if err := c.h.openThread(sub.ctx, thread, dest, c.caller); err != nil {
		c.drop(sub)
		return err
	}
	rs, err := c.h.startRun(sub.ctx, thread, start)
	if err != nil {
		c.drop(sub)
		return err
	}
	cur := runCursor{run: rs.runID, from: rs.f.Position()}
	cur.seq = cur.from
	started, _ := json.Marshal(mesh.RunStarted(thread, runID))
	if !c.send(serverFrame{Type: "events", ThreadID: thread, RunID: runID, Seq: cur.seq, Cursor: cur.String(), Events: []json.RawMessage{started}}) {
		rs.close()
		c.drop(sub)
		return nil
	}
	c.wg.Add(1)
	go c.pumpRun(sub, rs.f, runID, cur)
	return nil
}

// reattach sends the rest of a run after a cursor: the run's events are
// read again from where it started, through a new translator, so that it
// gives the same frames; those the client got are not sent.
func (c *socket) reattach(f clientFrame) error {
	if err := core.CheckConversationID(f.ThreadID); err != nil {
		return err
	}
	if err := core.CheckID(`"runId"`, f.RunID); err != nil {
		return err
	}
	cur, err := parseCursor(f.Cursor)
	if err != nil {
		return err
	}
	if _, err := c.h.core.HeadFor(c.ctx, f.ThreadID, c.caller); err != nil {
		return err
	}
	sub, err := c.subscribe(f.ThreadID)
	if err != nil {
		return err
	}
	fol, err := c.h.core.Follow(sub.ctx, f.ThreadID, cur.from)
	if err != nil {
		c.drop(sub)
		return err
	}
	c.wg.Add(1)
	go c.pumpRun(sub, fol, f.RunID, cur)
	return nil
}

// pumpRun sends the frames of a run after cur.seq until the run ends, the
// client unfollows or the socket closes; the run goes on in the last two
// cases.
func (c *socket) pumpRun(sub *subscription, fol *core.Follower, clientRun string, cur runCursor) {
	defer c.wg.Done()
	defer fol.Close()
	defer c.drop(sub)
	tr := newOfficialTranslator(sub.thread, clientRun)
	after := cur.seq
	for {
		sev, err := fol.Next(sub.ctx)
		if err != nil {
			c.ended(sub, clientRun, cur, err)
			return
		}
		if !ofRun(sev, cur.run) {
			continue
		}
		var ev mesh.Event
		if err := json.Unmarshal(sev.Data, &ev); err != nil {
			continue
		}
		end := sev.Run == cur.run && (ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventRunError)
		evs := tr.translate(&ev)
		if end {
			// Before the last frame, so that the client's next run on the
			// thread (a resume) finds the thread free.
			c.drop(sub)
		}
		if sev.Seq > after && len(evs) > 0 {
			cur.seq = sev.Seq
			frame := serverFrame{Type: "events", ThreadID: sub.thread, RunID: clientRun, Seq: sev.Seq, Cursor: cur.String()}
			for _, e := range evs {
				data, _ := json.Marshal(e)
				frame.Events = append(frame.Events, data)
			}
			if !c.send(frame) {
				return
			}
		}
		if end {
			return
		}
	}
}

// ended tells the client why a run's or follow's frames stopped, unless it
// asked for that (unfollow, its socket closed).
func (c *socket) ended(sub *subscription, run string, cur runCursor, err error) {
	if sub.ctx.Err() != nil {
		return
	}
	frame := serverFrame{Type: "error", ThreadID: sub.thread, RunID: run, Code: mesh.CodeInternal, Message: "the bridge stopped following the thread: reattach", Status: 503}
	if cur.run != "" {
		frame.Cursor = cur.String()
	}
	switch {
	case errors.Is(err, core.ErrSlowConsumer):
		frame.Code, frame.Message = CodeSlowConsumer, "the client did not keep up; the run goes on: reattach with the last cursor (a follow: with the last seq)"
	case errors.Is(err, core.ErrCredentialExpired):
		return // the socket closes with a close frame that says so
	}
	c.send(frame)
}

// ofRun reports whether a stream event goes to the client of run: the
// run's own, and those that belong to no run (approval_decided).
func ofRun(sev core.StreamEvent, run string) bool {
	return sev.Run == run || sev.Run == "" && sev.Type == mesh.EventCustom
}

// follow sends every event of a thread after f.After (0: from the first),
// as GET /conversations/{id}/events does, until the client unfollows.
func (c *socket) follow(f clientFrame) error {
	if err := core.CheckConversationID(f.ThreadID); err != nil {
		return err
	}
	if _, err := c.h.core.HeadFor(c.ctx, f.ThreadID, c.caller); err != nil {
		return err
	}
	c.h.core.CheckQueued(c.ctx, f.ThreadID, c.caller)
	sub, err := c.subscribe(f.ThreadID)
	if err != nil {
		return err
	}
	var after uint64
	if f.After != nil {
		after = *f.After
	}
	fol, err := c.h.core.Follow(sub.ctx, f.ThreadID, after)
	if err != nil {
		c.drop(sub)
		return err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer fol.Close()
		defer c.drop(sub)
		for {
			sev, err := fol.Next(sub.ctx)
			if err != nil {
				c.ended(sub, "", runCursor{}, err)
				return
			}
			if !c.send(serverFrame{Type: "events", ThreadID: sub.thread, Seq: sev.Seq, Events: []json.RawMessage{sev.Data}}) {
				return
			}
		}
	}()
	return nil
}

// cancelRun stops the thread's run (runId: only that run), as POST
// /conversations/{id}/cancel does.
func (c *socket) cancelRun(f clientFrame) error {
	if err := core.CheckConversationID(f.ThreadID); err != nil {
		return err
	}
	if _, err := c.h.core.HeadFor(c.ctx, f.ThreadID, c.caller); err != nil {
		return err
	}
	return c.h.core.Cancel(c.ctx, f.ThreadID, f.RunID)
}
