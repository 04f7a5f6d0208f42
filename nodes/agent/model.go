package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file runs an llm step: the model loop. The model sees the history
// and the offered tools, answers with text or calls; each call is resolved
// (run, paused on an approval, or answered as an error) before the model is
// called again.

// loop alternates between the model and the tools until the model answers
// with text, a destructive call needs approval, or the iteration cap is hit.
func (t *turn) loop(ctx context.Context) {
	for {
		if paused := t.resolvePending(ctx); paused {
			t.end.outcome = mesh.OutcomeInterrupt
			return
		}
		if t.end.rejected != "" {
			t.stopRejected()
			return
		}
		if ctx.Err() != nil {
			t.cancelled(ctx)
			return
		}
		if t.conv.Direct {
			// A direct call: the call the user asked for, then its result.
			if t.ex.iterations > 0 || t.resumed != nil {
				t.end.response = t.lastResult()
				t.end.outcome = mesh.OutcomeSuccess
				return
			}
			t.ex.iterations++
			if err := t.directCall(); err != nil {
				t.end.errCode, t.end.errText = mesh.CodeToolError, err.Error()
				t.notice(err.Error())
				t.end.outcome = mesh.OutcomeError
				return
			}
			continue
		}
		if t.ex.iterations >= t.a.maxIter {
			t.notice(fmt.Sprintf("I stopped after %d tool iterations without reaching an answer.", t.a.maxIter))
			t.end.outcome = mesh.OutcomeSuccess
			return
		}
		t.ex.iterations++
		resp, msgID, err := t.generate(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.cancelled(ctx)
				return
			}
			t.end.errCode, t.end.errText = llmErrorCode(err), err.Error()
			if le := (*llm.Error)(nil); errors.As(err, &le) && le.Code == llm.CodeRateLimit && le.RetryAfter > 0 {
				t.end.resetAt = time.Now().Add(le.RetryAfter)
			}
			t.notice("LLM error: " + err.Error())
			t.end.outcome = mesh.OutcomeError
			return
		}
		msg := t.message(msgID, mesh.RoleAssistant, resp.Text)
		for i, c := range resp.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, t.toToolCall(c, i))
		}
		msg.Reasoning = resp.Reasoning
		for _, th := range resp.Thoughts {
			msg.Thoughts = append(msg.Thoughts, mesh.Thought(th))
		}
		t.ex.add(msg)
		if len(msg.ToolCalls) == 0 {
			if o := t.step.output; o != nil {
				object, err := o.check(resp.Text)
				if err != nil && t.outputProblem == nil {
					t.outputProblem = err // sent back once with the answer
					continue
				}
				if err != nil {
					t.end.errCode, t.end.errText = mesh.CodeOutputInvalid, fmt.Sprintf("step %s: %v", t.step.cfg.Name, err)
					t.notice(t.end.errText)
					t.end.outcome = mesh.OutcomeError
					return
				}
				resp.Text = object
			}
			t.end.response = resp.Text
			t.end.outcome = mesh.OutcomeSuccess
			return
		}
	}
}

// directCall adds the assistant message of a direct conversation's turn:
// the call its user message names, resolved against the step's offer as a
// model's call is (so the catalog, destructiveness and approvals hold).
func (t *turn) directCall() error {
	var dc mesh.DirectCall
	if err := json.Unmarshal([]byte(t.item.Message), &dc); err != nil || dc.Server == "" || dc.Tool == "" {
		return fmt.Errorf("a direct call is {\"server\", \"tool\", \"arguments\"}, not %q", mesh.Clip(t.item.Message))
	}
	o := t.stepOffer()
	t.offer = o
	for fn, e := range o.mcp {
		if e.Server != dc.Server || e.Name != dc.Tool {
			continue
		}
		args, _ := json.Marshal(dc.Arguments)
		msg := t.message(t.idPrefix()+"-a1", mesh.RoleAssistant, "")
		msg.ToolCalls = []mesh.ToolCall{t.toToolCall(llm.ToolCall{Name: fn, Arguments: args}, 0)}
		t.ex.add(msg)
		return nil
	}
	return fmt.Errorf("the agent %s offers no tool %s of server %s", t.a.name, dc.Tool, dc.Server)
}

// lastResult is the content of the last tool result this run added.
func (t *turn) lastResult() string {
	for i := len(t.ex.added) - 1; i >= 0; i-- {
		if t.ex.added[i].Role == mesh.RoleTool {
			return t.ex.added[i].Content
		}
	}
	return ""
}

// generate calls the model, streaming its reasoning as REASONING events
// and its text as TEXT_MESSAGE events.
func (t *turn) generate(ctx context.Context) (*llm.Response, string, error) {
	msgID := t.idPrefix() + "-a" + strconv.Itoa(t.ex.iterations)
	r := reasoningEvents{t: t, msgID: msgID}
	started := false
	start := func() {
		r.end() // the reasoning comes before the text it led to
		if !started {
			started = true
			t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: msgID, Role: string(mesh.RoleAssistant), Name: t.author()})
		}
	}
	streamed := false
	t.offer = t.stepOffer()
	req := llm.Request{
		System:   t.systemPrompt(),
		Messages: t.history(ctx),
		Tools:    t.offer.tools,
		// The step's own settings; the provider holds the llm section's.
		Sampling: t.step.cfg.Sampling,
		OnText: func(delta string) {
			if delta == "" {
				return
			}
			streamed = true
			start()
			t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: msgID, Delta: delta})
		},
		OnReasoning: r.delta,
	}
	if o := t.step.output; o != nil {
		req.Output = o.request
		if t.outputProblem != nil {
			req.Messages = append(req.Messages, outputRetry(t.outputProblem))
		}
	}
	resp, err := t.step.provider.Generate(t.queue.context(t.log.WithContext(ctx)), req)
	if err == nil {
		t.ex.usage = t.ex.usage.Add(resp.Usage)
		t.ex.model = t.step.provider.Model()
		if !r.streamed {
			r.delta(resp.Reasoning)
		}
		u := resp.Usage
		t.countCost(t.ex.model, u.InputTokens, u.OutputTokens, u.CachedTokens, u.CacheWriteTokens)
		if !streamed && resp.Text != "" {
			start()
			t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: msgID, Delta: resp.Text})
		}
	}
	r.end()
	if started {
		t.emit(mesh.Event{Type: mesh.EventTextMessageEnd, MessageID: msgID})
	}
	return resp, msgID, err
}

// reasoningEvents publishes one model call's reasoning: a span holding
// one reasoning message, whose id is the answer's with -reasoning (its
// span's, -thinking), closed before the answer's text starts.
type reasoningEvents struct {
	t        *turn
	msgID    string
	streamed bool // a delta was published
	open     bool
}

func (r *reasoningEvents) delta(d string) {
	if d == "" {
		return
	}
	id := r.msgID + "-reasoning"
	if !r.streamed {
		r.streamed, r.open = true, true
		r.t.emit(mesh.Event{Type: mesh.EventReasoningStart, MessageID: r.msgID + "-thinking"})
		r.t.emit(mesh.Event{Type: mesh.EventReasoningMessageStart, MessageID: id, Role: mesh.RoleReasoning})
	}
	if r.open {
		r.t.emit(mesh.Event{Type: mesh.EventReasoningMessageContent, MessageID: id, Delta: d})
	}
}

func (r *reasoningEvents) end() {
	if !r.open {
		return
	}
	r.open = false
	r.t.emit(mesh.Event{Type: mesh.EventReasoningMessageEnd, MessageID: r.msgID + "-reasoning"})
	r.t.emit(mesh.Event{Type: mesh.EventReasoningEnd, MessageID: r.msgID + "-thinking"})
}

// systemPrompt is the step's prompt, its placeholders resolved; a step
// without one has the agent's.
func (t *turn) systemPrompt() string {
	p := t.step.cfg.Prompt
	if p == "" {
		p = t.a.cfg.Agent.Prompt
	}
	return resolvePrompt(p, t.state())
}

// resolvePrompt fills {key} placeholders from the session state.
func resolvePrompt(prompt string, state map[string]any) string {
	return config.ResolvePlaceholders(prompt, func(key string) (string, bool) {
		v, ok := state[key]
		if !ok {
			return "", false
		}
		switch v := v.(type) {
		case string:
			return v, true
		case map[string]any, []any:
			// A step's structured output, as the JSON it was.
			b, _ := json.Marshal(v)
			return string(b), true
		}
		return fmt.Sprint(v), true
	})
}

// history is the conversation as the model sees it: every message but the
// system prompt, the notices meant for people and the answers a regenerate
// superseded. Of the messages of the
// tree's steps, a step sees its own run's whole exchange but only the
// answers of the others, and only those written before its run began: their
// tool traffic is theirs, and a sibling's answer between a call and its
// result would break the exchange no model API takes apart.
func (t *turn) history(ctx context.Context) []llm.Message {
	stored, added := t.conv.Messages, t.ex.added
	n := len(stored) + len(added)
	// at is the i-th message of the conversation and the run's: the two
	// are not joined into one copy, as every model call reads them.
	at := func(i int) *mesh.Message {
		if i < len(stored) {
			return &stored[i]
		}
		return &added[i-len(stored)]
	}
	firstOwn := n
	if !t.a.simple {
		for i := range n {
			if t.own(*at(i)) {
				firstOwn = i
				break
			}
		}
	}
	out := make([]llm.Message, 0, n)
	for i := range n {
		m := at(i)
		if t.conv.IsSuperseded(m.ID) {
			continue // a regenerated answer's earlier one: people's only
		}
		if t.foreign(*m) {
			if i > firstOwn || m.Role != mesh.RoleAssistant || len(m.ToolCalls) > 0 || m.Content == "" || m.Notice {
				continue
			}
			if m.Step == "" {
				// Another member of a group chat: models take no author
				// on an assistant message, so the text names it.
				out = append(out, llm.Message{Role: llm.RoleAssistant, Content: m.Name + ": " + m.Content})
				continue
			}
		}
		switch m.Role {
		case mesh.RoleUser:
			text, files := t.files(ctx, *m)
			out = append(out, llm.Message{Role: llm.RoleUser, Content: text, Files: files})
		case mesh.RoleAssistant:
			if m.Notice {
				continue
			}
			lm := llm.Message{Role: llm.RoleAssistant, Content: m.Content, Name: m.Name}
			for _, th := range m.Thoughts {
				lm.Thoughts = append(lm.Thoughts, llm.Thought(th))
			}
			for _, c := range m.ToolCalls {
				lm.ToolCalls = append(lm.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.ArgumentsJSON())})
			}
			out = append(out, lm)
		case mesh.RoleTool:
			out = append(out, llm.Message{Role: llm.RoleTool, Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError})
		}
	}
	return out
}

// toToolCall resolves a model's call against the catalog. The call gets an id
// derived from the run, so a run executed again produces the same ids.
func (t *turn) toToolCall(c llm.ToolCall, index int) mesh.ToolCall {
	call := mesh.ToolCall{
		ID:   fmt.Sprintf("%s-c%d-%d", t.idPrefix(), t.ex.iterations, index),
		Name: c.Name,
	}
	if len(c.Arguments) > 0 {
		_ = json.Unmarshal(c.Arguments, &call.Arguments)
	}
	if call.Arguments == nil {
		call.Arguments = map[string]any{}
	}
	o := t.offer
	if o == nil {
		o = t.stepOffer()
	}
	if c.Name == exitLoopTool && o.exitLoop {
		call.Tool = exitLoopTool
	} else if c.Name == endChatTool && o.endChat {
		call.Tool = endChatTool
	} else if c.Name == setStateTool && o.setState {
		call.Tool = setStateTool
	} else if r, ok := o.remote[c.Name]; ok {
		call.Server, call.Tool, call.Destructive = remoteServerPrefix+r.cfg.Name, r.cfg.Name, r.cfg.IsDestructive()
	} else if e, ok := o.mcp[c.Name]; ok {
		call.Server, call.Tool, call.Destructive = e.Server, e.Name, e.DestructiveHint
	}
	return call
}

// resolvePending answers every call of the last assistant message that has
// no result yet: safe calls run, the decided call of a resume runs or is
// rejected, and the first other destructive call pauses the run, as does a
// sub-agent that waits for an approval of its own.
func (t *turn) resolvePending(ctx context.Context) (paused bool) {
	for _, call := range t.lastCalls() {
		if t.hasResult(call.ID) {
			continue
		}
		if ctx.Err() != nil {
			return false
		}
		if t.resumed != nil && t.resumed.ToolCallID == call.ID {
			if t.resolveDecided(ctx, call, t.resumed) {
				return true
			}
			continue
		}
		t.emitCall(call)
		_, remote := remoteName(call)
		allowed := t.step.cfg.AllowDestructive
		switch {
		case call.Tool == exitLoopTool && call.Server == "":
			t.end.exitLoop = true
			t.result(call, "The loop ends after this step. Now give your final answer.", false)
		case call.Tool == endChatTool && call.Server == "":
			t.end.endChat = true
			t.result(call, "The group chat ends after your answer. Now give your final answer.", false)
		case call.Tool == setStateTool && call.Server == "":
			t.setState(call)
		case t.a.cfg.Replay != nil && call.Server != "" && (remote || !t.a.tools.Load().readOnly(call.Server, call.Tool)):
			// A replay runs read-only tools alone: the rest is proposed,
			// never run nor sent for approval.
			t.answer(call, t.standIn(), "")
		case remote && (!call.Destructive || allowed):
			// An allowed destructive call is treated as an approved one:
			// cut off mid-flight, it is not sent again.
			if t.callRemote(ctx, call, call.ID, call.Destructive) {
				return true
			}
		case call.Server == "":
			t.result(call, fmt.Sprintf("error: unknown tool %q", call.Name), true)
		case call.Destructive && !allowed:
			decided, err := t.pause(ctx, call)
			if err != nil {
				t.result(call, "error: could not request an approval: "+err.Error(), true)
				continue
			}
			if decided == nil || t.resolveDecided(ctx, call, decided) {
				return true // waits for a person, or for a sub-agent's approval
			}
		default:
			t.answer(call, t.callUnattended(ctx, call), "")
		}
	}
	return false
}

// emitCall publishes a call as TOOL_CALL_START, ARGS and END.
func (t *turn) emitCall(call mesh.ToolCall) {
	parent := t.ex.parent()
	t.emit(mesh.Event{Type: mesh.EventToolCallStart, ToolCallID: call.ID, ToolCallName: call.Name, ParentMessageID: parent})
	t.emit(mesh.Event{Type: mesh.EventToolCallArgs, ToolCallID: call.ID, Delta: call.ArgumentsJSON()})
	t.emit(mesh.Event{Type: mesh.EventToolCallEnd, ToolCallID: call.ID})
}

// result records a tool's answer as a tool message and a TOOL_CALL_RESULT.
func (t *turn) result(call mesh.ToolCall, content string, isError bool) {
	t.decidedResult(call, toolAnswer{content: content, isError: isError}, "")
}

// decidedResult is result for an answer a, of a call that waited for an
// approval decided by by (empty: none). The TOOL_CALL_RESULT's metadata
// says whether it failed (isError) and how long a timed call took
// (durationMs), which AG-UI's result has no fields for.
func (t *turn) decidedResult(call mesh.ToolCall, a toolAnswer, by string) {
	id := call.ID + "-result"
	m := t.message(id, mesh.RoleTool, a.content)
	m.ToolCallID, m.ToolName, m.IsError, m.DecidedBy, m.StandIn = call.ID, call.Name, a.isError, by, a.standIn
	t.ex.add(m)
	ev := mesh.Event{Type: mesh.EventToolCallResult, MessageID: id, ToolCallID: call.ID, Content: a.content, Role: string(mesh.RoleTool)}
	if a.isError || a.timed {
		ev.Metadata = map[string]any{}
	}
	if a.isError {
		ev.Metadata["isError"] = true
	}
	if a.timed {
		ev.Metadata["durationMs"] = a.took.Milliseconds()
	}
	if a.standIn {
		ev.Metadata = map[string]any{"notRun": mesh.RoleReplay}
	}
	t.emit(ev)
}

// llmErrorCode maps a provider error to a RUN_ERROR code.
func llmErrorCode(err error) string {
	var coded interface{ RunErrorCode() string }
	if errors.As(err, &coded) {
		return coded.RunErrorCode()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return mesh.CodeLLMTimeout
	}
	return mesh.CodeLLMError
}
