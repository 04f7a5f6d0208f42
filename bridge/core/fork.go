package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Forks (POST /conversations/{id}/fork): a branch is a new conversation
// of the caller whose history is the original's up to a point, shared
// with the original's log (store.SessionStore.Fork), and whose state is
// the one the original's events had at that point: the last
// STATE_SNAPSHOT up to it and the STATE_DELTAs after. A point is a
// message (after it, or before it) or an event's stream sequence; each
// maps to the other:
//
//   - after a message: the events up to the first event of the next
//     message, when the same run wrote it, else up to the end of the run
//     that wrote the message;
//   - before a message: the events before its first one (a user
//     message's: before its run's first);
//   - an event: the messages of every run ended by then.
//
// The branch carries no approval, queued or running turn: a tool call of
// its history left without a result (it waited for an approval at that
// point) is answered on the branch as not run, so that a model takes the
// history.

// ErrForkInsideRun refuses a point inside a run that has not ended.
var ErrForkInsideRun = mesh.NewError("conflict", http.StatusConflict, "the point is inside a run that has not ended")

// ErrEventsExpired refuses a point whose events the events stream no
// longer keeps (mesh.events_max_age): the state there cannot be told.
var ErrEventsExpired = mesh.NewError("events_expired", http.StatusGone, "the events of that point are no longer kept")

// NotRunResult is the content of the result a branch gives a tool call
// its history left waiting for a decision.
const NotRunResult = "error: not run: this conversation is a branch made while the call waited for a decision; it was never decided here"

// ForkRequest is where to fork a conversation: exactly one of After,
// Before and EventSeq.
type ForkRequest struct {
	After    *string
	Before   *string
	EventSeq *uint64
	// ID is the branch's id when the client chose it (ForkAs); empty
	// means a new one.
	ID string
}

// ForkPoint is how a client that is not REST names a fork: AG-UI's
// forwardedProps.fork and the A2A fork extension's metadata.
type ForkPoint struct {
	From     string  `json:"from"`
	Before   string  `json:"before"`
	After    string  `json:"after"`
	EventSeq *uint64 `json:"event_seq"`
}

// Request is the fork the point names.
func (f *ForkPoint) Request() ForkRequest {
	var r ForkRequest
	if f.Before != "" {
		r.Before = &f.Before
	}
	if f.After != "" {
		r.After = &f.After
	}
	r.EventSeq = f.EventSeq
	return r
}

// Fork makes a branch of conversation id for the caller at the point req
// names; a conversation the caller may not read is not found.
func (c *Core) Fork(ctx context.Context, id string, req ForkRequest, caller Caller) (*mesh.Conversation, error) {
	if err := c.Writes(caller); err != nil {
		return nil, err
	}
	if _, err := c.HeadFor(ctx, id, caller); err != nil {
		return nil, err
	}
	points := 0
	for _, set := range []bool{req.After != nil, req.Before != nil, req.EventSeq != nil} {
		if set {
			points++
		}
	}
	if points != 1 {
		return nil, mesh.ErrBadRequest.With(`a fork names one point: {"after": message id}, {"before": message id} or {"event_seq": n}`)
	}
	if d := c.Degradation(); d != nil {
		return nil, mesh.ErrDegraded.With(fmt.Sprintf("the mesh is degraded since %s (%s): new conversations are paused, existing ones go on", d.Since.Format(time.RFC3339), d.Reason))
	}
	base, err := c.Sessions.Get(ctx, id)
	if err != nil {
		return nil, c.hideGone(caller, id, err)
	}
	evs, err := c.eventsOf(ctx, base.ID, base.CreatedAt, base.ForkedFrom)
	if err != nil {
		return nil, err
	}
	var cut store.Cut
	var seq uint64
	switch {
	case req.EventSeq != nil:
		cut, seq, err = c.cutAtEvent(ctx, base, evs, *req.EventSeq)
	default:
		cut, seq, evs, err = c.cutAtMessage(ctx, base, evs, req)
	}
	if err != nil {
		return nil, err
	}
	state, err := c.stateAt(ctx, evs, seq)
	if err != nil {
		return nil, err
	}
	sid := caller.SessionID
	if !mesh.ValidTraceID(sid) {
		sid = mesh.NewTraceID()
	}
	branch := &mesh.Conversation{ID: cmp.Or(req.ID, mesh.NewID()), SessionID: sid, Agent: base.Agent, Owner: c.owner(caller), Direct: base.Direct,
		Status: mesh.StatusActive, State: state, ForkedFrom: &mesh.ForkPoint{Conversation: base.ID, Message: cut.Last, EventSeq: seq}}
	if base.Group != nil {
		branch.Group = &mesh.GroupRun{Name: base.Group.Name}
	}
	if err := c.Sessions.Fork(ctx, base, cut, branch, closeCalls); err != nil {
		return nil, err
	}
	if sup := c.keptSuperseded(ctx, base, branch); len(sup) > 0 {
		b, err := c.Sessions.UpdateHead(ctx, branch.ID, func(cv *mesh.Conversation) error {
			cv.Superseded = sup
			return nil
		})
		if err != nil {
			return nil, err
		}
		branch = b
	}
	c.log.Info().Str("session", branch.ID).Str("forked_from", base.ID).Str("message_id", cut.Last).Uint64("event_seq", seq).Msg("conversation forked")
	c.indexConversation(branch)
	c.keepHead(branch)
	noteConversation(ctx, branch.ID, branch.SessionID)
	return branch, nil
}

// keptSuperseded are the marks of answers a regenerate superseded
// (mesh/actions.go) that hold on the branch: the answer and the turn that
// regenerated it are both in its history.
func (c *Core) keptSuperseded(ctx context.Context, base, branch *mesh.Conversation) map[string]string {
	out := map[string]string{}
	for msg, turn := range base.Superseded {
		hasMsg, err := c.Sessions.HoldsTurn(ctx, branch, msg)
		if err != nil || !hasMsg {
			continue
		}
		if hasTurn, err := c.Sessions.HoldsTurn(ctx, branch, turn); err == nil && hasTurn {
			out[msg] = turn
		}
	}
	return out
}

// closeCalls answers, as not run, the calls of the last assistant
// message of history that have no result: they waited for a decision the
// branch does not carry.
func closeCalls(history []mesh.Message) []mesh.Message {
	answered := map[string]bool{}
	for i := len(history) - 1; i >= 0; i-- {
		m := history[i]
		if m.Role == mesh.RoleTool {
			answered[m.ToolCallID] = true
			continue
		}
		if m.Notice {
			continue // an approval's request, meant for people
		}
		if m.Role != mesh.RoleAssistant || len(m.ToolCalls) == 0 {
			return nil
		}
		var out []mesh.Message
		now := time.Now().UTC()
		for _, call := range m.ToolCalls {
			if !answered[call.ID] {
				out = append(out, mesh.Message{ID: call.ID + "-not-run", Role: mesh.RoleTool, Content: NotRunResult, ToolCallID: call.ID,
					ToolName: call.Name, IsError: true, TurnID: m.TurnID, CreatedAt: now})
			}
		}
		return out
	}
	return nil
}

// cutAtMessage places a point after or before a message, and returns
// the events it maps on: base's, or, for a message of the part a branch
// shares, those of the conversation it was forked from (up the chain),
// no later than the event the fork was made at.
func (c *Core) cutAtMessage(ctx context.Context, base *mesh.Conversation, evs *convEvents, req ForkRequest) (store.Cut, uint64, *convEvents, error) {
	id, after := "", req.After != nil
	if after {
		id = *req.After
	} else {
		id = *req.Before
	}
	unknown := mesh.ErrBadRequest.With(fmt.Sprintf("message %s is not in conversation %s", mesh.Clip(id), base.ID))
	if mesh.CheckID(id) != nil {
		return store.Cut{}, 0, nil, unknown
	}
	f, err := c.Sessions.Find(ctx, base, func(m *mesh.Message) bool { return m.ID == id })
	if err != nil {
		return store.Cut{}, 0, nil, err
	}
	if f == nil {
		return store.Cut{}, 0, nil, unknown
	}
	m, cut := f.Message, f.After
	if !after {
		cut = f.Before
	}
	point := func(e *convEvents) (uint64, error) {
		if after {
			return e.after(&m, f.Next)
		}
		return e.before(&m)
	}
	seq, err := point(evs)
	for cur := evs; errors.Is(err, ErrEventsExpired) && cur.forkedFrom != nil; {
		parent, perr := c.parentEvents(ctx, cur)
		if perr != nil {
			return store.Cut{}, 0, nil, perr
		}
		var pseq uint64
		if pseq, err = point(parent); err == nil {
			seq, evs = min(pseq, cur.forkedFrom.EventSeq), parent
		}
		cur = parent
	}
	return cut, seq, evs, err
}

// parentEvents are the events of the conversation e's was forked from.
func (c *Core) parentEvents(ctx context.Context, e *convEvents) (*convEvents, error) {
	h, err := c.Sessions.HeadAny(ctx, e.forkedFrom.Conversation)
	if err != nil {
		if errors.Is(err, mesh.ErrSessionNotFound) || mesh.IsGone(err) {
			return &convEvents{aged: true}, nil // gone: so are the events a purge took
		}
		return nil, err
	}
	return c.eventsOf(ctx, h.ID, h.CreatedAt, h.ForkedFrom)
}

// cutAtEvent places a point at the event of stream sequence seq: the
// messages of every run that ended by then.
func (c *Core) cutAtEvent(ctx context.Context, base *mesh.Conversation, evs *convEvents, seq uint64) (store.Cut, uint64, error) {
	switch {
	case seq == 0 || seq > evs.last:
		return store.Cut{}, 0, mesh.ErrBadRequest.With(fmt.Sprintf("event_seq %d is out of range: the events stream holds 1 to %d", seq, evs.last))
	case seq < evs.first:
		return store.Cut{}, 0, ErrEventsExpired.With(fmt.Sprintf("event %d is no longer kept: the events stream starts at %d (mesh.events_max_age)", seq, evs.first))
	}
	if !slices.ContainsFunc(evs.list, func(e convEvent) bool { return e.seq == seq }) {
		return store.Cut{}, 0, mesh.ErrBadRequest.With(fmt.Sprintf("event %d is not an event of conversation %s", seq, base.ID))
	}
	ended, open := map[string]bool{}, map[string]bool{}
	for _, e := range evs.list {
		if e.seq > seq {
			break
		}
		switch e.typ {
		case mesh.EventRunStarted:
			open[e.run] = true
		case mesh.EventRunFinished, mesh.EventRunError:
			ended[e.run], open[e.run] = true, false
		}
	}
	for run, o := range open {
		if o {
			return store.Cut{}, 0, ErrForkInsideRun.With(fmt.Sprintf("event %d is inside run %s, which had not ended then", seq, run))
		}
	}
	// A message of a run this conversation's events never show came
	// before them: a branch's shared part, or runs whose events aged out.
	f, err := c.Sessions.Find(ctx, base, func(m *mesh.Message) bool { return m.TurnID == "" || ended[m.TurnID] || !evs.hasRun(m.TurnID) })
	if err != nil || f == nil {
		return store.Cut{}, seq, err
	}
	return f.After, seq, nil
}

// convEvent is what a fork needs of one event of a conversation.
type convEvent struct {
	seq     uint64
	typ     mesh.EventType
	run     string
	msg     string // the message the event is of: its id, or the parent of a call
	custom  string // a CUSTOM event's name
	runOf   string // run_queued's runId
	payload []byte // a state event's
}

// convEvents are the events of one conversation the events stream holds,
// in order, and the stream's first and last sequences.
type convEvents struct {
	list        []convEvent
	first, last uint64
	// aged: the stream dropped events since the conversation began.
	aged bool
	// forkedFrom is the point of the conversation, a branch's.
	forkedFrom *mesh.ForkPoint
	// runs are the runs the events show.
	runs map[string]bool
}

// hasRun says whether the events show run.
func (e *convEvents) hasRun(run string) bool { return e.runs[run] }

// eventsOf reads the events of conversation id, which began at created
// (a branch of forkedFrom).
func (c *Core) eventsOf(ctx context.Context, id string, created time.Time, forkedFrom *mesh.ForkPoint) (*convEvents, error) {
	subj, err := c.ns.EventsOf(id)
	if err != nil {
		return nil, CheckConversationID("")
	}
	st, err := c.cfg.JS.Stream(ctx, c.ns.Stream(mesh.StreamEvents))
	if err != nil {
		return nil, fmt.Errorf("events stream: %w", err)
	}
	// The stream's count of the conversation's events, by subject: the
	// reads stop once they have them all (new ones may come meanwhile).
	si, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return nil, fmt.Errorf("events stream: %w", err)
	}
	info := si.State
	out := &convEvents{first: info.FirstSeq, last: info.LastSeq, aged: info.FirstSeq > 1 && info.FirstTime.After(created), forkedFrom: forkedFrom, runs: map[string]bool{}}
	total := uint64(0)
	for _, n := range info.Subjects {
		total += n
	}
	if total == 0 {
		return out, nil
	}
	err = store.ReadSubject(ctx, st, subj, total, func(m jetstream.Msg, md *jetstream.MsgMetadata) {
		var ev mesh.Event
		if json.Unmarshal(m.Data(), &ev) != nil {
			return
		}
		e := convEvent{seq: md.Sequence.Stream, typ: ev.Type, run: m.Headers().Get(mesh.HeaderRun)}
		if e.run == "" {
			e.run = ev.RunID
		}
		out.runs[e.run] = true
		switch ev.Type {
		case mesh.EventTextMessageStart, mesh.EventToolCallResult:
			e.msg = ev.MessageID
		case mesh.EventToolCallStart:
			e.msg = ev.ParentMessageID
		case mesh.EventStateSnapshot, mesh.EventStateDelta:
			e.payload = m.Data()
		case mesh.EventCustom:
			e.custom = ev.Name
			if v, ok := ev.Value.(map[string]any); ok {
				e.runOf, _ = v["runId"].(string)
				out.runs[e.runOf] = true
			}
		}
		out.list = append(out.list, e)
	})
	if err != nil {
		return nil, fmt.Errorf("read the events of %s: %w", id, err)
	}
	return out, nil
}

// lastBefore is the sequence of the conversation's last event before
// index i of the list (0: none).
func (e *convEvents) lastBefore(i int) uint64 {
	if i <= 0 {
		return 0
	}
	return e.list[i-1].seq
}

// firstOfRun is the index of the first event of run (its run_queued or
// its start), -1 when none is kept.
func (e *convEvents) firstOfRun(run string) int {
	return slices.IndexFunc(e.list, func(ev convEvent) bool {
		return ev.run == run && (ev.typ == mesh.EventRunStarted || ev.custom == mesh.CustomRunQueued) || ev.runOf == run && ev.custom == mesh.CustomRunQueued
	})
}

// firstOfMessage is the index of the first event of message id, -1 when
// none is kept.
func (e *convEvents) firstOfMessage(id string) int {
	return slices.IndexFunc(e.list, func(ev convEvent) bool { return ev.msg == id })
}

// endOfRun is the sequence of the end of run, or an error: the run has
// not ended (conflict), or its events are gone.
func (e *convEvents) endOfRun(run string) (uint64, error) {
	started := false
	for _, ev := range e.list {
		if ev.run != run {
			continue
		}
		switch ev.typ {
		case mesh.EventRunFinished, mesh.EventRunError:
			return ev.seq, nil
		case mesh.EventRunStarted:
			started = true
		}
	}
	if started {
		return 0, ErrForkInsideRun.With(fmt.Sprintf("run %s has not ended", run))
	}
	return 0, e.expired(fmt.Sprintf("the events of run %s", run))
}

// expired is the error of events that are not there.
func (e *convEvents) expired(what string) error {
	return ErrEventsExpired.With(what + " are no longer kept (mesh.events_max_age): the state at that point cannot be told")
}

// after is the event sequence of the point after message m (next is the
// message that follows it, nil when m is the newest).
func (e *convEvents) after(m *mesh.Message, next *mesh.Message) (uint64, error) {
	if next != nil && (m.TurnID == "" || next.TurnID == m.TurnID) && next.TurnID != "" {
		// The next message begins the next run, or goes on m's.
		i := e.firstOfMessage(next.ID)
		if next.TurnID != m.TurnID {
			i = e.firstOfRun(next.TurnID)
		}
		if i >= 0 {
			return e.lastBefore(i), nil
		}
	}
	if m.TurnID == "" {
		// A message no run wrote (the system prompt): what came before
		// the next run, or everything.
		if next != nil && next.TurnID != "" {
			if i := e.firstOfRun(next.TurnID); i >= 0 {
				return e.lastBefore(i), nil
			}
			return 0, e.expired("the events after message " + m.ID)
		}
		return e.lastBefore(len(e.list)), nil
	}
	return e.endOfRun(m.TurnID)
}

// before is the event sequence of the point before message m.
func (e *convEvents) before(m *mesh.Message) (uint64, error) {
	if m.TurnID == "" {
		return 0, nil // nothing ran before a message no run wrote
	}
	if i := e.firstOfMessage(m.ID); i >= 0 && m.ID != m.TurnID {
		return e.lastBefore(i), nil
	}
	if i := e.firstOfRun(m.TurnID); i >= 0 {
		return e.lastBefore(i), nil
	}
	return 0, e.expired("the events of run " + m.TurnID)
}

// stateAt is the state the events e had once the event at seq was
// written: the last snapshot up to it and the deltas after. With no
// snapshot up to seq, it is a branch's state at its fork (the state of
// the conversation it was forked from, at that point), or empty, unless
// the stream dropped events since the conversation began (then it cannot
// be told).
func (c *Core) stateAt(ctx context.Context, e *convEvents, seq uint64) (map[string]any, error) {
	start := -1
	for i, ev := range e.list {
		if ev.seq > seq {
			break
		}
		if ev.typ == mesh.EventStateSnapshot {
			start = i
		}
	}
	state := map[string]any{}
	if start < 0 {
		switch {
		case e.forkedFrom != nil:
			parent, err := c.parentEvents(ctx, e)
			if err != nil {
				return nil, err
			}
			if state, err = c.stateAt(ctx, parent, e.forkedFrom.EventSeq); err != nil {
				return nil, err
			}
		case seq > 0 && e.aged:
			return nil, e.expired(fmt.Sprintf("the state events up to event %d", seq))
		}
		start = 0
	}
	for _, ev := range e.list[start:] {
		if ev.seq > seq {
			break
		}
		var body struct {
			Snapshot map[string]any `json:"snapshot"`
			Delta    any            `json:"delta"`
		}
		if ev.payload == nil || json.Unmarshal(ev.payload, &body) != nil {
			continue
		}
		switch ev.typ {
		case mesh.EventStateSnapshot:
			state = body.Snapshot
			if state == nil {
				state = map[string]any{}
			}
		case mesh.EventStateDelta:
			next, err := mesh.ApplyStateDelta(state, body.Delta)
			if err != nil {
				return nil, fmt.Errorf("state at event %d: %w", ev.seq, err)
			}
			state = next
		}
	}
	if len(state) == 0 {
		return nil, nil
	}
	return state, nil
}

// Family is a conversation's family: the first conversation its branches
// come from, and every member the caller may read, the root first, then
// by creation time.
type Family struct {
	Root     string   `json:"root"`
	Branches []Branch `json:"branches"`
}

// Branch is one member of a family.
type Branch struct {
	ID           string          `json:"id"`
	Title        string          `json:"title,omitempty"`
	ForkedFrom   *mesh.ForkPoint `json:"forked_from,omitempty"`
	MessageCount int             `json:"message_count"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
}

// Branches is the family of conversation id, as the caller may see it;
// a conversation the caller may not read is not found.
func (c *Core) Branches(ctx context.Context, id string, caller Caller) (*Family, error) {
	if _, err := c.HeadFor(ctx, id, caller); err != nil {
		return nil, err
	}
	all, err := c.summaries(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*mesh.ConversationSummary, len(all))
	for i := range all {
		byID[all[i].ID] = &all[i]
	}
	// rootOf follows forked_from up, as far as it names conversations.
	rootOf := func(id string) string {
		seen := map[string]bool{}
		for !seen[id] {
			seen[id] = true
			s := byID[id]
			if s == nil || s.ForkedFrom == nil {
				return id
			}
			id = s.ForkedFrom.Conversation
		}
		return id
	}
	fam := &Family{Root: rootOf(id)}
	var rootItem *Branch
	for _, s := range all {
		if s.Status == mesh.StatusDeleted || s.Status == mesh.StatusExpired || !c.Sees(caller, s.Owner) {
			continue
		}
		if s.ID != fam.Root && (s.ForkedFrom == nil || rootOf(s.ID) != fam.Root) {
			continue
		}
		b := Branch{ID: s.ID, Title: s.Title, ForkedFrom: s.ForkedFrom, MessageCount: s.MessageCount, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
		if s.ID == fam.Root {
			rootItem = &b
			continue
		}
		fam.Branches = append(fam.Branches, b)
	}
	slices.SortFunc(fam.Branches, func(a, b Branch) int {
		if d := a.CreatedAt.Compare(b.CreatedAt); d != 0 {
			return d
		}
		return cmpString(a.ID, b.ID)
	})
	if rootItem != nil {
		fam.Branches = append([]Branch{*rootItem}, fam.Branches...)
	}
	return fam, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// summaries are the list forms of every conversation: the listing's
// index when the bridge keeps one, else a read of the bucket.
func (c *Core) summaries(ctx context.Context) ([]mesh.ConversationSummary, error) {
	if c.lists == nil {
		return c.Sessions.Summaries(ctx)
	}
	x := c.lists.sessions
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]mesh.ConversationSummary, 0, len(x.all))
	for _, e := range x.all {
		if s, ok := e.item.(mesh.ConversationSummary); ok {
			out = append(out, s)
		}
	}
	return out, nil
}
