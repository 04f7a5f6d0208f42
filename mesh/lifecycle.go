package mesh

import (
	"errors"
)

// This file holds the end of a conversation's life: deletion (a
// tombstone), purge, and expiry (the sessions bucket's max age, whose
// limit markers say for a while that a key aged out).

// Statuses a conversation ends with. A deleted conversation is a tombstone:
// its id, owner, deleted_at and deleted_by stay, its messages are gone. An
// expired one is no value at all: only the bucket's limit marker says, for
// sessions.expired_kept, that the key aged out; the listings show it so.
const (
	StatusDeleted Status = "deleted"
	StatusExpired Status = "expired"
)

// IsGone reports whether err says the conversation was deleted or expired.
func IsGone(err error) bool {
	return errors.Is(err, ErrSessionDeleted) || errors.Is(err, ErrSessionExpired)
}

// goneKinds are the kinds that also match ErrSessionNotFound.
var goneKinds = map[string]bool{ErrSessionDeleted.kind: true, ErrSessionExpired.kind: true}

// GoneError is the 410 of a tombstone, with its owner: the bridge answers
// it only to those who may see the conversation (others get 404, as for
// any conversation not theirs).
type GoneError struct {
	Err   *Error
	Owner string
}

func (e *GoneError) Error() string { return e.Err.Error() }
func (e *GoneError) Unwrap() error { return e.Err }

// GoneOwner is the owner of the tombstone err reports; ok is false when err
// is no tombstone's.
func GoneOwner(err error) (owner string, ok bool) {
	var g *GoneError
	if errors.As(err, &g) {
		return g.Owner, true
	}
	return "", false
}
