package mesh

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestCheckID(t *testing.T) {
	long := strings.Repeat("a", 4015)
	tests := []struct {
		name, id string
		wantErr  bool
	}{
		{"uuid", NewID(), false},
		{"letters digits dash underscore", "run_1-A", false},
		{"max length", strings.Repeat("x", MaxIDLen), false},
		{"empty", "", true},
		{"one too long", strings.Repeat("x", MaxIDLen+1), true},
		{"past the NATS control line", long, true},
		{"dot", "a.b", true},
		{"wildcard", "a*", true},
		{"space", "a b", true},
		{"equals (a token, not an id)", "a=b", true},
		{"non-ASCII", "é", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckID(tt.id)
			if (err != nil) != tt.wantErr {
				t.Fatalf("CheckID(%s) = %v, want error %v", Clip(tt.id), err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidID) {
				t.Errorf("error %v does not match ErrInvalidID", err)
			}
			if err != nil && len(err.Error()) > 2*ClipLen+80 {
				t.Errorf("error is %d bytes long: it echoes what was sent: %.200s", len(err.Error()), err)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"abc", `"abc"`},
		{strings.Repeat("a", ClipLen), `"` + strings.Repeat("a", ClipLen) + `"`},
		{strings.Repeat("a", ClipLen+1), `"` + strings.Repeat("a", ClipLen) + `"…`},
		{strings.Repeat("é", 40), `"` + strings.Repeat("é", ClipLen) + `"…`},
	}
	for _, tt := range tests {
		if got := Clip(tt.in); got != tt.want {
			t.Errorf("Clip(%.40q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// Ids of conversations, turns and approvals are random UUIDs (version 4,
// RFC 9562 variant), in their canonical lower-case form, never repeated.
func TestNewIDIsARandomUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("NewID() = %q: %v, version %d, variant %v; want a canonical version 4 UUID", id, err, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %s", id)
		}
		seen[id] = true
	}
}
