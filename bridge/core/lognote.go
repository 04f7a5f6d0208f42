package core

import (
	"context"
	"sync"
)

// LogNote is what the bridge's http log line says about the conversation a
// request reached: its id and its session id (sid). A caller that sends no
// X-Session-ID still gets the conversation's own sid on the line, so every
// request of a conversation can be found by it. The bridge puts one note in
// each request's context ([WithLogNote]); the core fills it where it finds
// the conversation, whichever protocol asked.
type LogNote struct {
	mu           sync.Mutex
	conversation string
	sid          string
}

type logNoteKey struct{}

// WithLogNote returns ctx carrying a new, empty note, and the note.
func WithLogNote(ctx context.Context) (context.Context, *LogNote) {
	n := &LogNote{}
	return context.WithValue(ctx, logNoteKey{}, n), n
}

// Conversation is the conversation id and session id noted, either empty
// when the request reached none.
func (n *LogNote) Conversation() (id, sid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conversation, n.sid
}

// noteConversation records conversation id and its sid on ctx's note, if
// it has one; an empty value keeps what is there.
func noteConversation(ctx context.Context, id, sid string) {
	n, _ := ctx.Value(logNoteKey{}).(*LogNote)
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if id != "" {
		n.conversation = id
	}
	if sid != "" {
		n.sid = sid
	}
}
