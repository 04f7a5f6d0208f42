package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// act is what a message does to its task.
type act int

const (
	// actTurn runs the message as a new turn of the conversation.
	actTurn act = iota
	// actDecide decides the approval the task waits for.
	actDecide
	// actHint answers a task waiting for approval whose reply is neither
	// an approval nor a rejection: nothing runs.
	actHint
)

// plan is where a message goes and what it does there.
type plan struct {
	id       string
	created  bool
	act      act
	approval string
	approved bool
}

// plan finds the message's conversation (or creates it) and decides what
// the message does:
//
//	taskId set           that conversation; unknown → -32001; a contextId
//	                     that differs from the task id → -32602
//	only contextId set   that conversation, created with that id if new
//	                     (a branch of another when the message's metadata
//	                     names a fork, fork.go)
//	neither              a new conversation (or branch)
//
// A conversation is the target's (a chat of the endpoint's group, or the
// agent's when the endpoint is /a2a), and created so; one of another
// target is unknown (-32001).
//
// In it: a pending approval is decided by the text ("approved", "yes" …
// or "rejected", "no" …, see [mesh.ParseApprovalWord]) or by a data part
// {"approved": bool}; other text gets a hint. A turn in progress refuses
// the message (-32004). Otherwise the message is a new turn, also after
// the task completed: a task is a conversation, which goes on.
func (c *call) plan(ctx context.Context, req *sendRequest) (*plan, error) {
	taskID, ctxID := req.msg.TaskID, req.msg.ContextID
	p := &plan{}
	fork, ferr := forkOf(req.msg)
	if ferr != nil {
		return nil, ferr
	}
	if fork != nil && taskID != "" {
		return nil, errParams("message.taskId", "a fork starts a new context (fork.go): send it with a new contextId, or none, and no taskId")
	}
	// Bad files are refused before a task is created.
	if err := c.h.core.CheckUploads(req.uploads); err != nil {
		return nil, toRPC(err, taskID)
	}
	// A message that may start a turn needs the user role; one that only
	// decides an approval, the approver role (core.Decide checks it).
	converse := c.need(auth.Converse)
	var head *store.SessionHead
	var err error
	switch {
	case taskID != "" && mesh.CheckID(taskID) != nil:
		return nil, errTaskNotFound(taskID)
	case taskID == "" && ctxID != "" && mesh.CheckID(ctxID) != nil:
		return nil, errParams("message.contextId", fmt.Sprintf("contextId %q: a context id is %s", clip(ctxID), mesh.IDRule))
	}
	switch {
	case taskID != "":
		if ctxID != "" && ctxID != taskID {
			return nil, errParams("message.contextId", fmt.Sprintf("contextId %q is not the context of task %q: a task's contextId is its id", clip(ctxID), clip(taskID)))
		}
		p.id = taskID
		head, err = c.h.core.Sessions.Head(ctx, taskID)
		if mesh.IsGone(err) {
			return nil, c.gone(err, taskID)
		}
		if errors.Is(err, mesh.ErrSessionNotFound) {
			return nil, errTaskNotFound(taskID)
		}
	case ctxID != "":
		p.id = ctxID
		head, err = c.h.core.Sessions.Head(ctx, ctxID)
		if mesh.IsGone(err) {
			return nil, c.gone(err, ctxID)
		}
		if errors.Is(err, mesh.ErrSessionNotFound) {
			if req.text == "" {
				return nil, errParams("message.parts", "the message has no text part")
			}
			if converse != nil {
				return nil, converse
			}
			if fork != nil {
				created, forkErr := c.forkInto(ctx, ctxID, fork)
				if forkErr != nil {
					return nil, forkErr
				}
				if created {
					p.created = true
					return p, nil
				}
				// Forked meanwhile by another request: checked like one found.
				head, err = c.h.core.Sessions.Head(ctx, ctxID)
			} else if _, err = c.t.create(ctx, c.h, ctxID, c.caller); errors.Is(err, jetstream.ErrKeyExists) {
				head, err = c.h.core.Sessions.Head(ctx, ctxID)
			} else if err == nil {
				p.created = true
				return p, nil
			}
		} else if err == nil && fork != nil {
			if err := c.checkBranch(ctx, ctxID, fork); err != nil {
				return nil, err
			}
		}
	default:
		if req.text == "" {
			return nil, errParams("message.parts", "the message has no text part")
		}
		if converse != nil {
			return nil, converse
		}
		if fork != nil {
			p.id = mesh.NewID()
			created, err := c.forkInto(ctx, p.id, fork)
			if err != nil {
				return nil, err
			}
			p.created = created
			return p, nil
		}
		conv, err := c.t.create(ctx, c.h, mesh.NewID(), c.caller)
		if err != nil {
			return nil, err
		}
		p.id, p.created = conv.ID, true
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	if !c.t.owns(headGroup(head), head.Agent) || !c.reaches(head, taskID != "", req) {
		return nil, errTaskNotFound(p.id)
	}
	switch {
	case head.Status == mesh.StatusWaitingApproval && head.PendingApproval != nil:
		p.approval = head.PendingApproval.UUID
		switch {
		case req.approved != nil:
			p.act, p.approved = actDecide, *req.approved
		default:
			approved, known := mesh.ParseApprovalWord(req.text)
			p.act, p.approved = actDecide, approved
			if !known {
				p.act = actHint
			}
		}
	case head.Queued != nil && head.Turn == nil:
		e := errUnsupported(fmt.Sprintf("task %s has a message queued for an agent (turn %s); send the next message when it is done, or cancel it", p.id, head.Queued.ID))
		e.Meta = map[string]string{"taskId": p.id}
		return nil, e
	case head.Turn != nil || head.Status == mesh.StatusRunning:
		e := errUnsupported(fmt.Sprintf("task %s is working (turn %s); send the next message when it is done, or cancel it", p.id, turnID(head)))
		e.Meta = map[string]string{"taskId": p.id}
		return nil, e
	case req.text == "":
		return nil, errParams("message.parts", "the message has no text part (a data part {\"approved\": …} answers only a task waiting for approval)")
	}
	if p.act != actDecide && converse != nil {
		return nil, converse
	}
	return p, nil
}

// need is nil when the caller's roles grant perm, else a 403 JSON-RPC
// error: the /a2a endpoints take readers (tasks/get, ListTasks,
// resubscribe), and each method asks for what it does.
func (c *call) need(perm auth.Permission) *rpcError {
	if c.h.core.May(c.caller, perm) {
		return nil
	}
	if p := c.caller.Principal; p != nil {
		return errForbidden(auth.Describe(p, perm))
	}
	return errForbidden("forbidden")
}

// reaches reports whether the caller may send req to the conversation of
// head: its owner or an admin; or an approver whose message, naming the
// task, decides the approval it waits for. That is how a proxy approval
// comes back from another mesh: its agent forwards the decision with the
// decider's token, and the task belongs to whoever started it.
func (c *call) reaches(head *store.SessionHead, byTaskID bool, req *sendRequest) bool {
	if c.h.core.Sees(c.caller, head.Owner) {
		return true
	}
	if !byTaskID || head.Status != mesh.StatusWaitingApproval || head.PendingApproval == nil || !c.h.core.May(c.caller, auth.Decide) {
		return false
	}
	if _, known := mesh.ParseApprovalWord(req.text); req.approved == nil && !known {
		return false
	}
	c.decider = true
	return true
}

func turnID(h *store.SessionHead) string {
	if h.Turn != nil {
		return h.Turn.ID
	}
	return "queued"
}

// start starts what the plan does: the turn, or the resume of the decided
// approval. A nil run with a nil error means nothing was started (the
// approval was decided meanwhile by someone else): the task is answered as
// it is.
func (c *call) start(ctx context.Context, p *plan, req *sendRequest) (*core.Run, error) {
	switch p.act {
	case actTurn:
		files, err := c.h.core.StoreFiles(ctx, p.id, req.uploads, c.caller)
		if err != nil {
			return nil, err
		}
		if !req.blocking {
			return c.h.core.SendNonBlocking(ctx, p.id, req.text, c.caller, files...)
		}
		return c.h.core.Send(ctx, p.id, req.text, c.caller, files...)
	case actDecide:
		body, _ := json.Marshal(map[string]any{"approved": p.approved, "by": "a2a"})
		_, run, err := c.h.core.Decide(ctx, p.approval, body, c.caller)
		if errors.Is(err, mesh.ErrApprovalDecided) || errors.Is(err, mesh.ErrApprovalNotFound) {
			return nil, nil
		}
		return run, err
	}
	return nil, nil
}

// hint is the text of an input-required status message when the reply was
// neither an approval nor a rejection.
func hint(text string) string {
	return fmt.Sprintf("%q is neither an approval nor a rejection.", clip(text))
}

// startWait bounds how long a non-blocking send waits for an agent to take
// its run up before it answers.
const startWait = 2 * time.Second

// send serves message/send and SendMessage: blocking by default, it
// answers when the run finishes or pauses, or after WaitTimeout with the
// task still working; configuration.blocking false (0.3) or
// returnImmediately (1.0) answers as soon as an agent has taken the run up,
// with the task working.
func send(ctx context.Context, c *call) {
	req, rerr := c.d.send(c)
	if rerr != nil {
		c.fail(rerr)
		return
	}
	p, err := c.plan(ctx, req)
	if err != nil {
		c.fail(err)
		return
	}
	if p.act == actHint {
		c.answerTask(ctx, p.id, view{history: req.history, hint: hint(req.text)}, c.d.sendResult)
		return
	}
	run, err := c.start(ctx, p, req)
	if err != nil {
		c.fail(toRPC(err, p.id))
		return
	}
	if run == nil {
		c.answerTask(ctx, p.id, view{history: req.history}, c.d.sendResult)
		return
	}
	if !req.blocking {
		// Answer once an agent has the run (working), or after startWait
		// with the run still queued (submitted): a tasks/get right after
		// sees the same.
		sctx, cancel := context.WithTimeout(ctx, startWait)
		started := run.Started(sctx)
		cancel()
		run.Close()
		c.answerTask(ctx, p.id, view{history: req.history, pending: started}, c.d.sendResult)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, c.h.cfg.WaitTimeout)
	defer cancel()
	out, err := run.Wait(wctx)
	if ctx.Err() != nil {
		return // the client left; the task goes on
	}
	if err != nil {
		c.fail(toRPC(err, p.id))
		return
	}
	c.reply(c.d.sendResult(taskAfterRun(out.Conversation, run.ID, out.Event, view{history: req.history, pending: !out.Finished})))
}

// conversation reads the conversation of task id; one of another target
// is unknown (-32001).
func (c *call) conversation(ctx context.Context, id string) (*mesh.Conversation, error) {
	var conv *mesh.Conversation
	var err error
	if c.decider {
		// An approver answering the task's approval: it reads the task it
		// decided, nothing more (see call.reaches).
		conv, err = c.h.core.Sessions.Get(ctx, id)
	} else {
		conv, err = c.h.core.Conversation(ctx, id, c.caller) // the caller's own, or not found
	}
	if err != nil {
		return nil, err
	}
	if !c.t.owns(groupOf(conv), conv.Agent) {
		return nil, errTaskNotFound(id)
	}
	return conv, nil
}

// answerTask reads the conversation and answers it as a task.
func (c *call) answerTask(ctx context.Context, id string, v view, shape func(*wire.Task) any) {
	conv, err := c.conversation(ctx, id)
	if err != nil {
		c.fail(toRPC(err, id))
		return
	}
	c.reply(shape(taskOf(conv, v)))
}

// get serves tasks/get and GetTask.
func get(ctx context.Context, c *call) {
	id, history, rerr := c.d.taskQuery(c)
	if rerr != nil {
		c.fail(rerr)
		return
	}
	c.answerTask(ctx, id, view{history: history}, c.d.task)
}

// cancelWait bounds how long tasks/cancel waits for the run to stop.
const cancelWait = 10 * time.Second

// cancel serves tasks/cancel and CancelTask: a working task's run is
// cancelled (mesh.session.<id>.cancel) and the task answered once the run
// stopped (canceled), or after 10 s as it then is. A task waiting for an
// approval is not cancelable (-32002): refuse the call instead, with a
// message "rejected". A task that is not working (completed, failed,
// canceled, submitted) is not cancelable either.
func cancel(ctx context.Context, c *call) {
	id, rerr := c.d.taskID(c)
	if rerr != nil {
		c.fail(rerr)
		return
	}
	if rerr := c.need(auth.Converse); rerr != nil {
		c.fail(rerr)
		return
	}
	conv, err := c.conversation(ctx, id)
	if err != nil {
		c.fail(toRPC(err, id))
		return
	}
	switch state := stateOf(conv, view{}); {
	case state == wire.StateWorking:
	case state == wire.StateSubmitted && conv.Queued != nil:
		// Queued for an agent: cancelled before it starts.
	case state == wire.StateInputRequired:
		c.fail(errNotCancelable(id, `it waits for an approval; send the message "rejected" to refuse the call instead`))
		return
	default:
		c.fail(errNotCancelable(id, fmt.Sprintf("it is %s, not working", state)))
		return
	}
	runID := ""
	if conv.Turn != nil {
		runID = conv.Turn.ID
	} else if conv.Queued != nil {
		runID = conv.Queued.ID
	}
	f, ferr := c.h.core.Follow(ctx, id, core.FromNow)
	if err := c.h.core.Cancel(ctx, id, runID); err != nil {
		if ferr == nil {
			f.Close()
		}
		c.fail(toRPC(err, id))
		return
	}
	if ferr == nil {
		waitEnd(ctx, f, runID, cancelWait)
		f.Close()
	}
	conv, err = c.h.core.Sessions.Get(ctx, id)
	if err != nil {
		c.fail(toRPC(err, id))
		return
	}
	c.reply(c.d.task(taskOf(conv, view{run: runID})))
}

// waitEnd waits until run (any run when empty) ends, or for d.
func waitEnd(ctx context.Context, f *core.Follower, run string, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		sev, err := f.Next(ctx)
		if err != nil {
			return
		}
		if (run == "" || sev.Run == run) && (sev.Type == mesh.EventRunFinished || sev.Type == mesh.EventRunError) {
			return
		}
	}
}

// List pages: 50 tasks unless asked, 1 to 100.
const (
	defaultPageSize = 50
	maxPageSize     = 100
)

// pageToken is the cursor of ListTasks: the position of the last task of a
// page in the order of the list (status time descending, then id).
type pageToken struct {
	Time time.Time `json:"t"`
	ID   string    `json:"id"`
}

func (p pageToken) encode() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s string) (pageToken, bool) {
	var p pageToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &p) != nil || p.ID == "" {
		return pageToken{}, false
	}
	return p, true
}

// before reports whether a conversation comes before the cursor's in the
// list's order.
func (p pageToken) before(c *mesh.Conversation) bool {
	if !c.UpdatedAt.Equal(p.Time) {
		return c.UpdatedAt.After(p.Time)
	}
	return c.ID <= p.ID
}

// listTasks serves ListTasks (1.0): every conversation of the target is a
// task (the agent's, or the chats of the endpoint's group), newest
// status first, filtered by contextId (a conversation id: at most one task),
// status (TASK_STATE_…) and statusTimestampAfter, paged by an opaque cursor.
// Tasks have no history unless historyLength says so, and no artifacts
// unless includeArtifacts.
func listTasks(ctx context.Context, c *call) {
	var p wire.ListTasksRequestV1
	if c.params == nil {
		c.params = json.RawMessage(`{}`)
	}
	if rerr := c.decodeParams(&p); rerr != nil {
		c.fail(rerr)
		return
	}
	size := defaultPageSize
	if p.PageSize != nil {
		if *p.PageSize < 1 || *p.PageSize > maxPageSize {
			c.fail(errParams("pageSize", fmt.Sprintf("pageSize must be between 1 and %d, got %d", maxPageSize, *p.PageSize)))
			return
		}
		size = *p.PageSize
	}
	if rerr := checkHistory("historyLength", p.HistoryLength); rerr != nil {
		c.fail(rerr)
		return
	}
	history := p.HistoryLength
	if history == nil {
		zero := 0
		history = &zero
	}
	var want wire.TaskState
	// @a2a-js/sdk 1.x sends "UNRECOGNIZED" for a status the caller left
	// out (its enum's zero is TASK_STATE_UNSPECIFIED, but an absent field
	// is undefined): both mean no filter.
	if p.Status != "" && p.Status != "TASK_STATE_UNSPECIFIED" && p.Status != "UNRECOGNIZED" {
		st, ok := wire.TaskStateFromV1(p.Status)
		if !ok {
			c.fail(errParams("status", fmt.Sprintf("status %q is not a TASK_STATE_… value", clip(p.Status))))
			return
		}
		want = st
	}
	var after time.Time
	if p.StatusTimestampAfter != "" {
		t, err := time.Parse(time.RFC3339Nano, p.StatusTimestampAfter)
		if err != nil {
			c.fail(errParams("statusTimestampAfter", fmt.Sprintf("statusTimestampAfter %q is not an ISO 8601 time such as 2025-10-28T10:30:00.000Z", clip(p.StatusTimestampAfter))))
			return
		}
		after = t
	}
	var cursor *pageToken
	if p.PageToken != "" {
		tok, ok := decodePageToken(p.PageToken)
		if !ok {
			c.fail(errParams("pageToken", "pageToken is not a token this agent returned"))
			return
		}
		cursor = &tok
	}
	convs, err := c.h.core.Sessions.List(ctx)
	if err != nil {
		c.fail(err)
		return
	}
	sort.SliceStable(convs, func(i, j int) bool {
		if !convs[i].UpdatedAt.Equal(convs[j].UpdatedAt) {
			return convs[i].UpdatedAt.After(convs[j].UpdatedAt)
		}
		return convs[i].ID < convs[j].ID
	})
	includeArtifacts := p.IncludeArtifacts != nil && *p.IncludeArtifacts
	var matched []*mesh.Conversation
	for _, conv := range convs {
		switch {
		case !c.t.owns(groupOf(conv), conv.Agent), !c.h.core.Sees(c.caller, conv.Owner):
		case p.ContextID != "" && conv.ID != p.ContextID:
		case want != "" && stateOf(conv, view{}) != want:
		case !after.IsZero() && conv.UpdatedAt.Before(after):
		default:
			matched = append(matched, conv)
		}
	}
	res := wire.ListTasksResponseV1{Tasks: []wire.TaskV1{}, PageSize: size, TotalSize: len(matched)}
	start := 0
	if cursor != nil {
		for start < len(matched) && cursor.before(matched[start]) {
			start++
		}
	}
	end := min(start+size, len(matched))
	for _, conv := range matched[start:end] {
		if *history != 0 || includeArtifacts {
			// The list has heads only: the task's history (its newest
			// messages) is read for the tasks of the page alone.
			full, err := c.h.core.Sessions.Get(ctx, conv.ID)
			if err != nil {
				c.fail(err)
				return
			}
			conv = full
		}
		res.Tasks = append(res.Tasks, *taskOf(conv, view{history: history, noArtifacts: !includeArtifacts}).V1())
	}
	if end < len(matched) {
		last := matched[end-1]
		res.NextPageToken = pageToken{Time: last.UpdatedAt, ID: last.ID}.encode()
	}
	c.reply(res)
}

// gone answers a task whose conversation was deleted or expired: 410 to
// those who may see it, not found to others.
func (c *call) gone(err error, id string) *rpcError {
	if owner, ok := mesh.GoneOwner(err); ok && !c.h.core.Sees(c.caller, owner) {
		return errTaskNotFound(id)
	}
	return errGone(err, id)
}
