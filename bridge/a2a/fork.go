package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// Branches over A2A: the fork extension. A context is a conversation; a
// client forks one by sending a message in a new context (a new contextId,
// or none) whose metadata, under the extension's URI, names the context
// and the point:
//
//	"metadata": {"<wire.ExtensionFork>": {"from": "<contextId>", "before": "<message id>"}}
//	                                      {"from": …, "after": "<message id>"}
//	                                      {"from": …, "event_seq": <event sequence>}
//
// The new context becomes the branch (core.Core.ForkAs: the caller's, its
// history the original's up to the point, no pending approval) and the
// message is its first turn. Message ids are the mesh's: those of the
// task's history (an agent message's messageId; a user message's is the
// id of the turn it started, which the history gives too). The card
// declares the extension in capabilities.extensions; a client activates
// it with the A2A-Extensions header (X-A2A-Extensions in 0.3), and an
// answer to a request that lists it lists it back. The metadata alone
// is enough: a fork is never guessed, only read from it.
//
// A later message in the branch's context may carry the same metadata
// (a client that keeps it): it is a turn of the branch. A contextId that
// exists and is not a branch of "from" is refused (-32602), and a "from"
// the caller may not read, or of another agent, is TaskNotFound.

// forkExtension is the card's declaration of the extension.
func forkExtension() wire.AgentExtension {
	return wire.AgentExtension{
		URI:         wire.ExtensionFork,
		Description: `Fork a context: a message in a new context whose metadata["` + wire.ExtensionFork + `"] is {"from": contextId, "before" | "after": messageId, or "event_seq": n} starts a branch of that context, its history the original's up to that point, with the message as its first turn.`,
	}
}

// forkMeta is what a message's metadata says under wire.ExtensionFork.
type forkMeta = core.ForkPoint

// forkOf reads the fork a message asks for: nil when its metadata names
// none.
func forkOf(m *wire.Message) (*forkMeta, *rpcError) {
	v, ok := m.Metadata[wire.ExtensionFork]
	if !ok || v == nil {
		return nil, nil
	}
	const field = "message.metadata"
	shape := fmt.Sprintf(`metadata[%q] is {"from": contextId, and one of "before" or "after" (a message id) or "event_seq"}`, wire.ExtensionFork)
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, errParams(field, shape)
	}
	var f forkMeta
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, errParams(field, shape+": "+mesh.JSONErrorText(err))
	}
	if mesh.CheckID(f.From) != nil {
		return nil, errParams(field, fmt.Sprintf("fork from %q: a context id is %s", clip(f.From), mesh.IDRule))
	}
	n := 0
	for _, set := range []bool{f.Before != "", f.After != "", f.EventSeq != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errParams(field, fmt.Sprintf("%s: it names %d points", shape, n))
	}
	for _, id := range []string{f.Before, f.After} {
		if id != "" && mesh.CheckID(id) != nil {
			return nil, errParams(field, fmt.Sprintf("fork at message %q: a message id is %s", clip(id), mesh.IDRule))
		}
	}
	return &f, nil
}

// forkInto makes context id the branch f asks for, and says whether it
// created it. The original must be a context of this endpoint's agent
// the caller may read; an id that exists must be the caller's branch of
// it (a later message of the branch).
func (c *call) forkInto(ctx context.Context, id string, f *forkMeta) (bool, error) {
	if f.From == id {
		return false, errParams("message.contextId", "a fork needs a new contextId, not the one it forks")
	}
	orig, err := c.h.core.HeadFor(ctx, f.From, c.caller)
	if err != nil {
		if errors.Is(err, mesh.ErrSessionNotFound) || mesh.IsGone(err) {
			return false, errTaskNotFound(f.From)
		}
		return false, err
	}
	if !c.t.owns(headGroup(orig), orig.Agent) {
		return false, errTaskNotFound(f.From)
	}
	_, err = c.h.core.ForkAs(ctx, f.From, id, f.Request(), c.caller)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, jetstream.ErrKeyExists):
		if errors.Is(err, mesh.ErrSessionNotFound) {
			return false, errTaskNotFound(f.From)
		}
		return false, toRPC(err, f.From)
	}
	return false, c.checkBranch(ctx, id, f)
}

// checkBranch refuses a fork into context id when id is not the caller's
// branch of f.From.
func (c *call) checkBranch(ctx context.Context, id string, f *forkMeta) error {
	from, err := c.h.core.ForkedFrom(ctx, id, c.caller)
	if err != nil {
		return toRPC(err, id)
	}
	if from == nil || from.Conversation != f.From {
		return errParams("message.contextId", fmt.Sprintf("context %s exists and is not a branch of %s: fork into a new contextId", clip(id), clip(f.From)))
	}
	return nil
}

// activateExtensions lists back, on the answer, the extensions of the
// request's activation header that this agent supports.
func activateExtensions(w http.ResponseWriter, r *http.Request) {
	for _, name := range []string{wire.HeaderExtensions, wire.HeaderExtensionsLegacy} {
		for _, v := range r.Header.Values(name) {
			for _, uri := range strings.Split(v, ",") {
				if strings.TrimSpace(uri) == wire.ExtensionFork && !slices.Contains(w.Header().Values(name), wire.ExtensionFork) {
					w.Header().Add(name, wire.ExtensionFork)
				}
			}
		}
	}
}
