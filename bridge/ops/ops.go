// Package ops is the bridge's read-only operations API, for the people who
// run the mesh rather than chat with it: the approver's inbox and the
// operator's live view of the mesh. The web page draws both (#/approvals,
// #/mesh); any other tool can read the same JSON.
//
//	GET /ops/approvals         every pending approval of the mesh, oldest first, with its conversation,
//	                           who asked and how long it waited; the decided ones, newest first (?history=N)
//	GET /ops/approvals/events  the same as SSE: a snapshot at once, another whenever an approval changes
//	GET /ops/mesh              the processes (nodes by role, state, last heartbeat, pid, host, what they
//	                           serve), circuit breakers, work queues, degradation mode, the latest rates
//	GET /ops/mesh/events       SSE: the rates of the last minutes at once, then the mesh every second
//	GET /ops/stats             the rates of the last minutes: events, turns per second, p95 turn time,
//	                           approvals waiting
//
// Approvals need the decide permission (approver, admin); the rest needs
// read (viewer and up): it holds no conversation content, no argument and
// no principal, only processes, counts and rates, less than the open
// /health tells. Deciding stays POST /approvals/{uuid} (package rest).
//
// What it reads: the approvals bucket and the nodes bucket, each through
// one KV watch kept in memory (only approvals a person decides: a policy's
// are counted, not kept); the work stream's per-subject counts and its
// consumers' state (MESH_WORK, CONSUMER.LIST: no message is read); the
// events stream's last sequence each tick, for the events per second; and
// the run starts and ends the bridge's hub already reads ([core.Core.Tap]),
// which it counts and times without a consumer of its own. The system
// events of mesh.evt._mesh.CUSTOM (node_down, node_up, degradation) come
// the same way.
//
// [Service.Run] owns every goroutine of the package: the two watches
// (store.WatchKV), while it takes one sample a second itself. It returns
// when its context ends, once the watches have stopped. Stream handlers
// run on their requests' goroutines.
package ops

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Config configures the operations API.
type Config struct {
	Core      *core.Core
	Resources *store.Resources
	// Interval is the mesh's heartbeat interval (monitor.interval). Zero
	// means 1s.
	Interval time.Duration
	// Missed is how many heartbeats a node misses before a monitor marks it
	// down (monitor.missed). Zero means 2.
	Missed int
	// Tick is how often the rates are sampled and the mesh view streamed.
	// Zero means 1s.
	Tick time.Duration
	// Samples is how many samples the charts keep. Zero means 300 (five
	// minutes at one a second).
	Samples int
	// Decided is how many decided approvals the inbox keeps in memory.
	// Zero means 200.
	Decided int
	Logger  zerolog.Logger
}

// Service serves the operations API.
type Service struct {
	cfg   Config
	core  *core.Core
	res   *store.Resources
	log   zerolog.Logger
	now   func() time.Time
	inbox *inbox
	nodes *nodeTable
	stats *sampler
	tick  *core.Signal // each sample

	viewMu sync.Mutex
	view   *View // the last view, reused within half a tick
}

// New validates cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Core == nil || cfg.Resources == nil {
		return nil, errors.New("ops: Core and Resources are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Missed <= 0 {
		cfg.Missed = 2
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Samples <= 0 {
		cfg.Samples = 300
	}
	if cfg.Decided <= 0 {
		cfg.Decided = 200
	}
	s := &Service{cfg: cfg, core: cfg.Core, res: cfg.Resources, log: cfg.Logger, now: time.Now, tick: core.NewSignal()}
	s.inbox = newInbox(cfg.Decided)
	s.nodes = newNodeTable()
	s.stats = newSampler(cfg.Samples)
	return s, nil
}

// Register mounts the routes on mux. s may be nil when only the patterns
// are wanted.
func (s *Service) Register(mux core.Mux) {
	mux.HandleFunc("GET /ops/approvals", s.getApprovals)
	mux.HandleFunc("GET /ops/approvals/events", s.approvalEvents)
	mux.HandleFunc("GET /ops/mesh", s.getMesh)
	mux.HandleFunc("GET /ops/mesh/events", s.meshEvents)
	mux.HandleFunc("GET /ops/stats", s.getStats)
}

// Run watches the approvals and nodes buckets, follows the events the hub
// reads and samples the rates until ctx ends; it returns nil then.
func (s *Service) Run(ctx context.Context) error {
	untap := s.core.Tap(s.stats.observe)
	defer untap()
	approvals := s.watch(ctx, "approvals", s.res.Approvals, s.inbox.apply, s.inbox.synced)
	nodes := s.watch(ctx, "nodes", s.res.Nodes, s.nodes.apply, s.nodes.synced)
	s.sample(ctx)
	<-approvals
	<-nodes
	return nil
}

// sample takes one sample every tick and wakes the mesh streams.
func (s *Service) sample(ctx context.Context) {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	// The tick opens with the ticker, before the first reading: a reading
	// that took a while would shorten the first tick's seconds and inflate
	// its rate.
	s.stats.start(time.Now())
	s.readSeq(ctx)
	s.readQueues(ctx)
	lastQueues := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.readSeq(ctx)
			if now.Sub(lastQueues) >= queuesEvery {
				s.readQueues(ctx)
				lastQueues = now
			}
			s.stats.take(now, s.inbox.pendingCount())
			s.tick.Fire()
		}
	}
}

// queuesEvery is how often the sampler reads the work queues, for
// mesh_work_pending: one listing of the work stream's consumers.
const queuesEvery = 15 * time.Second

// readQueues reads the work queues, which sets mesh_work_pending; a
// reading that fails leaves the last values.
func (s *Service) readQueues(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = s.queues(ctx)
}

// readSeq gives the sampler the events stream's last sequence. A reading
// that fails counts its events in the next tick that reads.
func (s *Service) readSeq(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Tick)
	defer cancel()
	if seq, err := s.core.EventsSeq(ctx); err == nil {
		s.stats.published(seq)
	}
}

func (s *Service) getApprovals(w http.ResponseWriter, r *http.Request) {
	n, err := historyParam(r, s.cfg.Decided)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, s.inboxView(r.Context(), n))
}

func (s *Service) getMesh(w http.ResponseWriter, r *http.Request) {
	core.WriteJSON(w, http.StatusOK, s.meshView(r.Context()))
}

func (s *Service) getStats(w http.ResponseWriter, _ *http.Request) {
	core.WriteJSON(w, http.StatusOK, map[string]any{"tick_ms": s.cfg.Tick.Milliseconds(), "samples": s.stats.history()})
}

// historyParam reads ?history=N, how many decided approvals to list: at
// most max, 50 when absent.
func historyParam(r *http.Request, max int) (int, error) {
	v := r.URL.Query().Get("history")
	if v == "" {
		return min(50, max), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, mesh.ErrBadRequest.With("history must be a count of decided approvals, 0 or more")
	}
	return min(n, max), nil
}
