package core

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/sse"
)

// Snapshot streams (GET /conversations?watch=true, /ops/approvals/events,
// /ops/mesh/events) send one JSON object per event, its "type" saying what
// it is, each a whole state rather than a change to one. Such a stream
// holds no queue: a client that reads slowly gets the latest state when it
// reads again, never a backlog.

// Signal wakes every waiter at once: Wait returns a channel that Fire
// closes.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewSignal returns a Signal nobody fired yet.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{})} }

// Wait returns the channel the next Fire closes.
func (g *Signal) Wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ch
}

// Fire wakes everyone waiting.
func (g *Signal) Fire() {
	g.mu.Lock()
	close(g.ch)
	g.ch = make(chan struct{})
	g.mu.Unlock()
}

// ServeSnapshots starts an SSE response on one of the bridge's stream
// slots and runs body until the client leaves, the body fails or the
// credential of the request (a stream token, a JWT) expires: the stream
// then ends (its events have no error type); an EventSource reconnects,
// and is refused until the page gives it a fresh token. scope names the
// stream in the bridge's metrics.
func (c *Core) ServeSnapshots(w http.ResponseWriter, r *http.Request, scope string, body func(context.Context, *sse.Writer) error) {
	closeStream, err := c.OpenStream(r.Context())
	if err != nil {
		WriteError(w, err)
		return
	}
	defer closeStream()
	out := sse.New(w).Observe(r, scope)
	if err := out.Start(nil); err != nil {
		return
	}
	if err := out.Retry(2000); err != nil {
		return
	}
	ctx := r.Context()
	if p := auth.FromContext(ctx); p != nil && !p.Expires.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, p.Expires)
		defer cancel()
	}
	_ = body(ctx, out)
}

// SendSnapshot writes one event: v's JSON object with "type" first.
func SendSnapshot(out *sse.Writer, typ string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	head := `{"type":"` + typ + `"`
	if len(data) > 2 {
		head += ","
	}
	return out.Event(0, append([]byte(head), data[1:]...))
}

// WaitFor waits until ready is closed, writing keep-alive comments
// meanwhile.
func WaitFor(ctx context.Context, out *sse.Writer, ready <-chan struct{}) error {
	keep := time.NewTicker(sse.DefaultKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ready:
			return nil
		case <-keep.C:
			if err := out.Comment("keep-alive"); err != nil {
				return err
			}
		}
	}
}
