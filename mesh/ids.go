package mesh

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// NewID returns a random UUID, the form of conversation, turn and approval ids.
func NewID() string { return uuid.NewString() }

// NewTraceID returns an 8-hex session trace id from crypto/rand: the
// conversation's X-Session-ID, short enough to read in a log line.
func NewTraceID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	return hex.EncodeToString(b[:])
}

const (
	// MaxIDLen is the longest id a client may send: a conversation (an AG-UI
	// thread, a dialect's session, an A2A task or context), a run, an approval
	// (an AG-UI interrupt), an A2A message, an X-Session-ID. Subjects and keys
	// built from ids stay far below the NATS server's 4 KiB control line, so no
	// request can take a role's connection off the bus.
	MaxIDLen = 128

	// IDRule says in words what [CheckID] accepts, for error messages.
	IDRule = "1 to 128 letters, digits, '-' and '_'"

	// ClipLen is how much of a value a client sent an error or a log line
	// quotes: [Clip] cuts the rest.
	ClipLen = 32
)

// CheckID reports whether id can name a conversation, a run, an approval
// or a task: 1 to [MaxIDLen] ASCII letters, digits, '-' and '_', so that it
// is one token of a subject and one key of a bucket, safe in headers and
// logs. It is the one check every id a client sends goes through, before
// it touches NATS. The error quotes at most [ClipLen] characters of id.
func CheckID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: %s is %d bytes long, more than %d", ErrInvalidID, Clip(id), len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return fmt.Errorf("%w: %s has %q at %d", ErrInvalidID, Clip(id), id[i], i)
		}
	}
	return nil
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// Clip quotes s for an error message or a log line: at most its first
// [ClipLen] characters, and "…" when there were more. What a client sent
// is never echoed whole.
func Clip(s string) string {
	n, cut := 0, len(s)
	for i := range s {
		if n == ClipLen {
			cut = i
			break
		}
		n++
	}
	if cut < len(s) {
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

// ValidTraceID reports whether an incoming X-Session-ID can be kept as a
// conversation's trace id: an id ([CheckID]) of at most 64 characters.
func ValidTraceID(s string) bool {
	return len(s) <= 64 && CheckID(s) == nil
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
