// Package agui streams the mesh's AG-UI events to browsers over Server-Sent
// Events, in the official AG-UI form and in the two dialects of the seeds:
//
//	POST /agui                           official AG-UI: RunAgentInput in, the run's events out
//	GET  /conversations/{id}/events      every event of a conversation: replay, then follow
//	POST /api/conversation               the dotted dialect (message.start …) of seed 000
//	POST /api/chat                       the simple dialect (log/text/data/done/error) of seed 001
//
// Events come from the events stream through the bridge core's followers
// ([core.Core.Follow]): a client that reconnects with Last-Event-ID gets
// exactly the events after it; a client too slow for its bounded buffer is
// cut off with a final error event and can resume. A client that disconnects
// from a run it started cancels that run; one that only follows /events just
// stops following.
package agui

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// Config configures the streaming endpoints.
type Config struct {
	Core *core.Core
	// MaxStreams bounds concurrent streams; past it a request gets 503 with
	// Retry-After. Zero means 10000.
	MaxStreams int
	// MaxBodyBytes bounds request bodies. Zero means 1 MiB.
	MaxBodyBytes int64
	// KeepAlive is the interval of SSE comments on idle streams. Zero means 15s.
	KeepAlive time.Duration
	// PingAfter and PingEvery: the simple dialect sends {"type":"ping"} every
	// PingEvery once a turn has run for PingAfter. Zero means 10s and 5s.
	PingAfter, PingEvery time.Duration
	Logger               zerolog.Logger
}

type handler struct {
	cfg   Config
	core  *core.Core
	slots chan struct{}
	log   zerolog.Logger
}

// Register mounts the endpoints on mux.
func Register(mux *http.ServeMux, cfg Config) {
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = 10000
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.PingAfter == 0 {
		cfg.PingAfter = 10 * time.Second
	}
	if cfg.PingEvery == 0 {
		cfg.PingEvery = 5 * time.Second
	}
	h := &handler{cfg: cfg, core: cfg.Core, slots: make(chan struct{}, cfg.MaxStreams), log: cfg.Logger}
	mux.HandleFunc("GET /conversations/{id}/events", h.events)
	mux.HandleFunc("POST /agui", h.agui)
}

// ErrTooManyStreams refuses a stream past MaxStreams.
var ErrTooManyStreams = &mesh.Error{Kind: "too_many_streams", Status: http.StatusServiceUnavailable, Message: "too many concurrent streams; retry shortly"}

// acquire takes a stream slot, or answers 503 and returns false.
func (h *handler) acquire(w http.ResponseWriter) bool {
	select {
	case h.slots <- struct{}{}:
		return true
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, ErrTooManyStreams)
		return false
	}
}

func (h *handler) release() { <-h.slots }

// next waits for the follower's next event, writing keep-alive comments
// while there is none.
func (h *handler) next(ctx context.Context, f *core.Follower, out *sse) (core.StreamEvent, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, h.cfg.KeepAlive)
		ev, err := f.Next(wait)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return ev, err
		}
		if err := out.comment("keep-alive"); err != nil {
			return core.StreamEvent{}, err
		}
	}
}
