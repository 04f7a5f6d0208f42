package agent

import (
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds what a run writes: its messages, their ids and their
// author. Every id derives from the work item (turn, tree, step key, gen), so
// a run executed again after a crash writes the same ids and is applied
// once.

// exchange is what a run adds to the conversation, with the counters that
// number the ids of what it adds.
type exchange struct {
	added      []mesh.Message // messages this run adds
	iterations int            // model calls made, a resumed run's earlier ones included
	notices    int            // notices added
	usage      llm.Usage      // tokens of this run's model calls
	model      string         // the model of this run's last model call
	state      stateChange    // the run's changes of the conversation state
}

// add appends a message the run writes.
func (e *exchange) add(m mesh.Message) { e.added = append(e.added, m) }

// lastCalls are the calls of the most recent assistant message of the run
// that has calls, if it added one.
func (e *exchange) lastCalls() []mesh.ToolCall {
	for i := len(e.added) - 1; i >= 0; i-- {
		if m := e.added[i]; m.Role == mesh.RoleAssistant && len(m.ToolCalls) > 0 {
			return m.ToolCalls
		}
	}
	return nil
}

// parent is the message whose calls are being answered: the last one added
// with calls.
func (e *exchange) parent() string {
	for i := len(e.added) - 1; i >= 0; i-- {
		if len(e.added[i].ToolCalls) > 0 {
			return e.added[i].ID
		}
	}
	return ""
}

// markApproval records on the run's call callID the approval it waits for.
func (e *exchange) markApproval(callID, approvalID string) {
	for i := range e.added {
		for j := range e.added[i].ToolCalls {
			if e.added[i].ToolCalls[j].ID == callID {
				e.added[i].ToolCalls[j].ApprovalID = approvalID
			}
		}
	}
}

// lastCalls finds the most recent assistant message of this run with tool
// calls.
func (t *turn) lastCalls() []mesh.ToolCall {
	if calls := t.ex.lastCalls(); calls != nil {
		return calls
	}
	for i := len(t.conv.Messages) - 1; i >= 0; i-- {
		m := t.conv.Messages[i]
		if !t.a.simple {
			if t.own(m) && m.Role == mesh.RoleAssistant && len(m.ToolCalls) > 0 {
				return m.ToolCalls
			}
			continue
		}
		if m.Role == mesh.RoleUser {
			return nil // a new request: earlier calls belong to earlier turns
		}
		if m.Role == mesh.RoleAssistant && len(m.ToolCalls) > 0 {
			return m.ToolCalls
		}
	}
	return nil
}

// hasResult says whether the call has a result, stored or added by this run.
func (t *turn) hasResult(callID string) bool {
	for _, list := range [][]mesh.Message{t.conv.Messages, t.ex.added} {
		for i := len(list) - 1; i >= 0; i-- {
			if list[i].Role == mesh.RoleTool && list[i].ToolCallID == callID {
				return true
			}
		}
	}
	return false
}

// treeID is the turn whose tree run this work item belongs to.
func (t *turn) treeID() string {
	switch {
	case t.tree != "":
		return t.tree
	case t.conv != nil && t.conv.Tree != nil:
		return t.conv.Tree.ID
	}
	return t.item.TurnID
}

// stepRunID names this run of the step: the same when the run is executed
// again or resumed, another for each parallel branch and loop iteration.
func (t *turn) stepRunID() string {
	return t.treeID() + "-" + idKey(t.step.key) + "g" + strconv.Itoa(t.gen)
}

// idKey is a step key as ids carry it: call ids are tokens, without dots.
func idKey(key string) string { return strings.ReplaceAll(key, ".", "_") }

// idPrefix starts the ids of the model messages and calls of this run, so
// that a run executed again produces the same ids. A step's ids stay the
// same across its resumes (they tell its own messages apart); the single
// step of an agent without a tree keeps the run's ids.
func (t *turn) idPrefix() string {
	if t.a.simple {
		return t.item.TurnID
	}
	return t.stepRunID()
}

// noticePrefix starts the ids of the notices of this run: unlike the model
// messages, a resume numbers them afresh.
func (t *turn) noticePrefix() string {
	if t.a.simple {
		return t.item.TurnID
	}
	return t.runID() + "-" + idKey(t.step.key) + "g" + strconv.Itoa(t.gen)
}

// own says whether a message was written by this run of the step.
func (t *turn) own(m mesh.Message) bool {
	return strings.HasPrefix(m.ID, t.idPrefix()+"-")
}

// stepKey is the key that the messages this run writes carry; empty for
// the single step of an agent without a tree.
func (t *turn) stepKey() string {
	if t.a.simple {
		return ""
	}
	return t.step.key
}

// author is the author of the messages this run writes: the step, or in a
// group chat the agent.
func (t *turn) author() string {
	if t.a.simple {
		if t.chat.name != "" {
			return t.a.name
		}
		return ""
	}
	return t.step.cfg.Name
}

// foreign says a message was written by another group member or another
// step of the tree: of those, a run sees only the answers.
func (t *turn) foreign(m mesh.Message) bool {
	if m.Step != "" {
		return t.a.simple || !t.own(m)
	}
	return m.Name != "" && m.Name != t.author()
}

// message is a message this run writes, with its author.
func (t *turn) message(id string, role mesh.Role, content string) mesh.Message {
	return mesh.Message{ID: id, Role: role, Content: content, Step: t.stepKey(), Name: t.author(), TurnID: t.runID(), CreatedAt: time.Now().UTC()}
}
