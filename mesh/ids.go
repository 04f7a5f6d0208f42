package mesh

import (
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/google/uuid"
)

// NewID returns a random UUID, the form of conversation, turn and approval ids.
func NewID() string { return uuid.NewString() }

// NewTraceID returns an 8-hex session trace id from crypto/rand (FR-030).
func NewTraceID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// ValidTraceID reports whether an incoming X-Session-ID can be kept: up to 64
// letters, digits, '-' and '_', so it is safe in logs and headers.
func ValidTraceID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
