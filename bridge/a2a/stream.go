package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// writeData writes v as the JSON data of one event, without HTML escaping.
func writeData(out *sse.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // one line, ended by "\n"
		return err
	}
	return out.Event(0, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// streamer writes the events of one run of one task as JSON-RPC responses
// of a stream.
type streamer struct {
	c    *call
	out  *sse.Writer
	f    *core.Follower
	task string
	run  string
	// started are the artifacts (text messages) already streamed: later
	// chunks append to them.
	started map[string]bool
	// notices are messages meant for people (approval requests, errors):
	// they end up in status messages, not artifacts.
	notices map[string]bool
	// authors are the members who write the messages of a group chat.
	authors map[string]string
}

func (s *streamer) send(ev any) error { return writeData(s.out, s.c.envelope(s.c.d.item(ev), nil)) }

func (s *streamer) status(st wire.TaskStatus, final bool) error {
	return s.send(&wire.StatusUpdate{Kind: wire.KindStatusUpdate, TaskID: s.task, ContextID: s.task, Status: st, Final: final})
}

// stream serves message/stream and SendStreamingMessage. The stream starts
// with the task (submitted when the message starts a turn: it waits in the
// queue until an agent takes it up; working when it decides an approval),
// then follows the run's events from MESH_EVENTS:
//
//	RUN_STARTED                 status-update working
//	TOOL_CALL_START             status-update working, message "Calling <tool>"
//	TEXT_MESSAGE_CONTENT        artifact-update: a chunk of the artifact named by the
//	                            message id (append after the first chunk); notices are left out;
//	                            in a group chat, metadata {"name": member} names its author
//	CUSTOM run_retried          the retried attempt's chunks replace what was streamed
//	CUSTOM speaker_selected     status-update working, message "<member> speaks" (group chats)
//	RUN_FINISHED / RUN_ERROR    artifact-update with the whole reply (lastChunk) when the
//	                            task completed, then the final status-update: completed,
//	                            input-required (with the approval), failed or canceled
//
// In 0.3 the last status-update has "final": true; in 1.0 the stream just
// ends after it. A message that answers a pending approval streams the
// resume the same way. A client that disconnects does not cancel the task
// (A2A semantics): the run goes on and tasks/resubscribe (SubscribeToTask)
// or tasks/get find it.
func stream(ctx context.Context, c *call) {
	req, rerr := c.d.send(c)
	if rerr != nil {
		c.failStream(rerr)
		return
	}
	closeStream, err := c.h.core.OpenStream(ctx)
	if err != nil {
		c.failStream(err)
		return
	}
	defer closeStream()
	p, err := c.plan(ctx, req)
	if err != nil {
		c.failStream(err)
		return
	}
	if p.act == actHint {
		conv, err := c.h.core.Sessions.Get(ctx, p.id)
		if err != nil {
			c.failStream(toRPC(err, p.id))
			return
		}
		t := taskOf(conv, view{history: req.history, hint: hint(req.text)})
		s := &streamer{c: c, out: sse.New(c.w).Observe(c.r, "a2a"), task: p.id}
		if s.out.Start(nil) != nil || s.send(t) != nil {
			return
		}
		_ = s.status(t.Status, true)
		return
	}
	f, err := c.h.core.Follow(ctx, p.id, core.FromNow)
	if err != nil {
		c.failStream(toRPC(err, p.id))
		return
	}
	defer f.Close()
	run, err := c.start(ctx, p, req)
	if err != nil {
		c.failStream(toRPC(err, p.id))
		return
	}
	s := &streamer{c: c, out: sse.New(c.w).Observe(c.r, "a2a"), f: f, task: p.id, started: map[string]bool{}, notices: map[string]bool{}, authors: map[string]string{}}
	if run == nil { // decided meanwhile by someone else: the task as it is
		conv, err := c.h.core.Sessions.Get(ctx, p.id)
		if err != nil {
			c.failStream(toRPC(err, p.id))
			return
		}
		t := taskOf(conv, view{history: req.history})
		if s.out.Start(nil) != nil || s.send(t) != nil {
			return
		}
		_ = s.status(t.Status, true)
		return
	}
	run.Close() // the stream, not the waiter, says when the run ends
	s.run = run.ID
	if s.out.Start(nil) != nil {
		return
	}
	state := wire.StateSubmitted
	if p.act == actDecide {
		state = wire.StateWorking
	}
	msg := *req.msg
	msg.Kind, msg.TaskID, msg.ContextID = wire.KindMessage, p.id, p.id
	first := &wire.Task{Kind: wire.KindTask, ID: p.id, ContextID: p.id, Status: wire.TaskStatus{State: state, Timestamp: stamp(time.Now())}, History: []wire.Message{msg}}
	if s.send(first) != nil {
		return
	}
	s.follow(ctx)
}

// resubscribe serves tasks/resubscribe and SubscribeToTask: the task as it
// is, then, while a run works on it or waits in the queue for an agent
// (submitted), that run's events as [stream] sends them, until the task
// completes or pauses. A task that is not working
// gets its state and the end of the stream: in 0.3 a final status-update
// follows the task; 1.0 refuses a terminal task (-32004, as the spec says)
// and ends the stream after the task otherwise.
func resubscribe(ctx context.Context, c *call) {
	id, rerr := c.d.taskID(c)
	if rerr != nil {
		c.failStream(rerr)
		return
	}
	closeStream, err := c.h.core.OpenStream(ctx)
	if err != nil {
		c.failStream(err)
		return
	}
	defer closeStream()
	// Follow before reading, so that nothing published in between is lost.
	f, err := c.h.core.Follow(ctx, id, core.FromNow)
	if err != nil {
		c.failStream(toRPC(err, id))
		return
	}
	defer f.Close()
	conv, err := c.conversation(ctx, id)
	if err != nil {
		c.failStream(toRPC(err, id))
		return
	}
	t := taskOf(conv, view{history: new(int)})
	state := t.Status.State
	if state.Terminal() && c.d.version() == wire.Version10 {
		c.failStream(&rpcError{Code: wire.CodeUnsupportedOperation, Message: "task " + id + " is " + string(state) + ": there is nothing to subscribe to; read it with GetTask", Meta: map[string]string{"taskId": id}})
		return
	}
	s := &streamer{c: c, out: sse.New(c.w).Observe(c.r, "a2a"), f: f, task: id, started: map[string]bool{}, notices: map[string]bool{}, authors: map[string]string{}}
	if s.out.Start(nil) != nil || s.send(t) != nil {
		return
	}
	queued := state == wire.StateSubmitted && conv.Queued != nil
	if state != wire.StateWorking && !queued {
		if c.d.version() == wire.Version03 {
			_ = s.status(t.Status, true)
		}
		return
	}
	if conv.Turn != nil {
		s.run = conv.Turn.ID
	} else if queued {
		s.run = conv.Queued.ID
	}
	s.follow(ctx)
}

// follow streams the run's events until it ends, then the final state.
func (s *streamer) follow(ctx context.Context) {
	for {
		wait, cancel := context.WithTimeout(ctx, s.c.h.cfg.KeepAlive)
		sev, err := s.f.Next(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return // the client left; the task goes on
		case errors.Is(err, context.DeadlineExceeded):
			if s.out.Comment("keep-alive") != nil {
				return
			}
			if s.ended(ctx) {
				s.finish(ctx, nil)
				return
			}
			continue
		case errors.Is(err, core.ErrSlowConsumer):
			s.out.CutOff()
			_ = writeData(s.out, s.c.envelope(nil, errInternal("the client did not keep up with the stream; the task goes on: resubscribe to it or get it")))
			return
		case errors.Is(err, core.ErrCredentialExpired):
			// As a request with that token is refused: invalid request.
			e := errInvalidRequest("the token of this stream expired; the task goes on: resubscribe to it with a fresh token")
			e.Meta = map[string]string{"taskId": s.task}
			_ = writeData(s.out, s.c.envelope(nil, e))
			return
		case err != nil:
			return // the bridge is stopping
		}
		if s.run != "" && sev.Run != s.run {
			continue
		}
		var ev mesh.Event
		if json.Unmarshal(sev.Data, &ev) != nil {
			continue
		}
		if ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventRunError {
			if s.run == "" {
				s.run = sev.Run
			}
			s.finish(ctx, &ev)
			return
		}
		if s.translate(&ev) != nil {
			return
		}
	}
}

// ended reports whether the run is over although its end event was not
// seen (a safety net, checked on every keep-alive).
func (s *streamer) ended(ctx context.Context) bool {
	head, err := s.c.h.core.Sessions.Head(ctx, s.task)
	if err != nil {
		return false
	}
	if s.run == "" {
		return head.Turn == nil && head.Queued == nil && head.Status != mesh.StatusRunning
	}
	return (head.Turn == nil || head.Turn.ID != s.run) && slices.Contains(head.RecentTurns, s.run)
}

// translate turns one event of the run into stream events.
func (s *streamer) translate(ev *mesh.Event) error {
	switch ev.Type {
	case mesh.EventRunStarted:
		return s.status(wire.TaskStatus{State: wire.StateWorking, Timestamp: stamp(time.Now())}, false)
	case mesh.EventToolCallStart:
		msg := agentMessage(s.task, ev.ToolCallID+"-status", "Calling "+ev.ToolCallName)
		return s.status(wire.TaskStatus{State: wire.StateWorking, Message: msg, Timestamp: stamp(time.Now())}, false)
	case mesh.EventTextMessageStart:
		if notice, _ := ev.Metadata["notice"].(bool); notice {
			s.notices[ev.MessageID] = true
		}
		if s.c.t.group != nil && ev.Name != "" {
			s.authors[ev.MessageID] = ev.Name
		}
	case mesh.EventTextMessageContent:
		delta := ev.DeltaText()
		if delta == "" || s.notices[ev.MessageID] {
			return nil
		}
		appendChunk := s.started[ev.MessageID]
		s.started[ev.MessageID] = true
		a := wire.Artifact{ArtifactID: ev.MessageID, Name: "response", Parts: []wire.Part{wire.TextPart(delta)}}
		if name := s.authors[ev.MessageID]; name != "" {
			a.Metadata = map[string]any{"name": name}
		}
		return s.send(&wire.ArtifactUpdate{Kind: wire.KindArtifactUpdate, TaskID: s.task, ContextID: s.task, Append: appendChunk, Artifact: a})
	case mesh.EventCustom:
		switch ev.Name {
		case mesh.CustomRunRetried:
			clear(s.started) // the new attempt's chunks replace the old ones
		case mesh.CustomSpeakerSelected:
			v, _ := ev.Value.(map[string]any)
			speaker, _ := v["speaker"].(string)
			turn, _ := v["turn"].(string)
			if speaker == "" || turn == "" {
				return nil
			}
			msg := agentMessage(s.task, turn+"-speaker", speaker+" speaks")
			msg.Metadata = map[string]any{"name": speaker}
			return s.status(wire.TaskStatus{State: wire.StateWorking, Message: msg, Timestamp: stamp(time.Now())}, false)
		}
	}
	return nil
}

// finish sends the final state of the task after its run: the whole reply
// as the artifact's last chunk when it completed, then the final status.
func (s *streamer) finish(ctx context.Context, end *mesh.Event) {
	conv, err := s.c.h.core.Sessions.Get(context.WithoutCancel(ctx), s.task)
	if err != nil {
		_ = writeData(s.out, s.c.envelope(nil, toRPC(err, s.task)))
		return
	}
	t := taskAfterRun(conv, s.run, end, view{history: new(int)})
	for _, a := range t.Artifacts {
		if err := s.send(&wire.ArtifactUpdate{Kind: wire.KindArtifactUpdate, TaskID: s.task, ContextID: s.task, Artifact: a, LastChunk: true}); err != nil {
			return
		}
	}
	_ = s.status(t.Status, true)
}
