package core

import (
	"fmt"

	"github.com/agentmesh/agentmesh/mesh"
)

// The checks of the ids a client sends, before any of them touches NATS:
// every surface calls these (or the stores of package mesh, which check
// again), so that an id too long for a subject, or with a character a
// subject or key cannot hold, is answered 400 or 404 at once, and the
// answer quotes at most mesh.ClipLen characters of it.

// MaxIdempotencyKeyLen bounds an Idempotency-Key. The key is hashed into
// the turn id, so any characters will do; only its length is checked.
const MaxIdempotencyKeyLen = 255

// CheckID checks an id a client sent in field (a body field, a header): nil,
// or a 400 bad_request naming field and the rule ([mesh.CheckID]).
func CheckID(field, id string) error {
	if mesh.CheckID(id) == nil {
		return nil
	}
	return mesh.ErrBadRequest.With(fmt.Sprintf("%s %s: an id is %s", field, mesh.Clip(id), mesh.IDRule))
}

// CheckConversationID checks the id of a conversation a request names (a
// path, an A2A task id): nil, or a 404 session_not_found, since no
// conversation can have it.
func CheckConversationID(id string) error {
	if mesh.CheckID(id) == nil {
		return nil
	}
	return mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", mesh.Clip(id), mesh.IDRule))
}

// CheckApprovalID checks the id of an approval a request names: nil, or a
// 404 approval_not_found.
func CheckApprovalID(id string) error {
	if mesh.CheckID(id) == nil {
		return nil
	}
	return mesh.ErrApprovalNotFound.With(fmt.Sprintf("approval %s not found: an approval id is %s", mesh.Clip(id), mesh.IDRule))
}

// CheckIdempotencyKey checks an Idempotency-Key: 1 to
// [MaxIdempotencyKeyLen] bytes.
func CheckIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return mesh.ErrBadRequest.With(fmt.Sprintf("Idempotency-Key must be 1 to %d characters, not %d", MaxIdempotencyKeyLen, len(key)))
	}
	return nil
}
