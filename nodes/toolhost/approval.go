package toolhost

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// This file enforces approvals where the effect happens: a tool that is not
// read-only, by this host's own reading of the server's annotations (never
// the caller's), runs only for a request that carries the approver's signed
// approval of that exact call. The approval must be signed by a trusted
// approver key, say "approved", and name the request's call id, this
// server, this tool and the hash of the request's arguments; it must be
// younger than mesh.ApprovalMaxAge. The call id is then run once
// (callOnce): the same approval sent again gets the first result.

// checkApproval reports whether the request may run tool t. An approval
// given by the policy non_destructive is honoured only for a tool this host
// finds not destructive. The error
// matches mesh.ErrApprovalRequired (none sent) or mesh.ErrApprovalInvalid.
func (c *conn) checkApproval(t *tool, tr mesh.ToolRequest) error {
	if tr.Approval == nil {
		return mesh.ErrApprovalRequired.With(fmt.Sprintf(
			"tool %s of server %s is not read-only: it runs only with an approval signed by the approver for this call", t.name, c.s.cfg.Name))
	}
	if err := tr.Approval.Verify(c.s.h.keys); err != nil {
		return err
	}
	// A policy's approval covers only what the policy says; this host
	// checks it against its own reading of the server, not the catalog's.
	if tr.Approval.By == mesh.PolicyBy(mesh.PolicyNonDestructive) && t.entry.Destructive() {
		return mesh.ErrApprovalInvalid.With(fmt.Sprintf(
			"approval %s was given by policy %s, but tool %s of server %s is destructive: a person must approve its calls",
			tr.Approval.ApprovalID, mesh.PolicyNonDestructive, t.name, c.s.cfg.Name))
	}
	hash, err := mesh.ArgsHash(tr.Arguments)
	if err != nil {
		return mesh.ErrBadRequest.With(fmt.Sprintf("arguments of %s.%s: %v", c.s.cfg.Name, t.name, err))
	}
	return tr.Approval.Permits(tr.CallID, c.s.cfg.Name, t.name, hash, c.s.h.now())
}

// keyWatch keeps the host's trusted keys equal to the approver keys
// published in the approvals bucket (keys _keys.<key>), so that a key
// published after the host started, or a second one during a rotation, is
// trusted as it comes, and a removed one no longer is.
type keyWatch struct {
	h  *Role
	kv jetstream.KeyValue
}

// start follows the published keys until ctx ends, on a goroutine of wg.
// It returns once the keys published now are trusted, so that calls are
// not refused for want of a key that is already published (or after 10s,
// or when the watch ended first: the rest comes with the updates). A
// watch that ends (a reconnect) is opened again, in a moment.
func (k *keyWatch) start(ctx context.Context, wg *sync.WaitGroup) error {
	done, err := store.WatchKV(ctx, k.kv, store.KVWatch{
		Keys:       mesh.ApprovalKeysFilter,
		Apply:      k.apply,
		Reopen:     250 * time.Millisecond,
		Retrying:   func(err error) { k.h.log.Warn().Err(err).Msg("watch approver keys; retrying") },
		WaitSynced: 10 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("watch approver keys: %w", err)
	}
	wg.Go(func() { <-done })
	return nil
}

// apply trusts a published key, or stops trusting a deleted one.
func (k *keyWatch) apply(e jetstream.KeyValueEntry) {
	key := strings.TrimPrefix(e.Key(), mesh.ApprovalKeysPrefix)
	if e.Operation() != jetstream.KeyValuePut {
		k.h.keys.Remove(key)
		k.h.log.Info().Str("key", key).Msg("approver key withdrawn")
		return
	}
	var pub mesh.ApproverKey
	if err := json.Unmarshal(e.Value(), &pub); err != nil || pub.Key != key {
		k.h.log.Warn().Str("key", e.Key()).Msg("ignoring a malformed approver key entry")
		return
	}
	if k.h.keys.Has(key) {
		return
	}
	if err := k.h.keys.Add(key); err != nil {
		k.h.log.Warn().Err(err).Msg("ignoring an approver key entry")
		return
	}
	k.h.log.Info().Str("key", key).Str("approver", pub.Node).Msg("approver key trusted")
}
