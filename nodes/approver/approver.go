// Package approver is the approver role: the only writer of approvals. It
// creates them when an agent asks, signs every decision, and hands the
// paused run back to the agents.
//
// It serves two endpoints of the micro service "mesh-approvals" (queue
// group, so replicas share the load):
//
//   - mesh.approval.*.request: an agent asks for an approval (the body is
//     the [mesh.Approval] to create). The approver computes the hash of the
//     arguments ([mesh.ArgsHash]), seals what was asked with its signing key
//     ([mesh.Approval.Seal]) and creates the record, idempotently: the same
//     id returns the record as it stands. With Policy set it decides at once
//     instead of waiting for a person, when the policy covers the call
//     (policy.go), and signs that decision; such records are never pending.
//   - mesh.approval.*.reseal: an admin who read a pending approval that a
//     release before seals recorded ([mesh.Approval.Unsealed]) asks for it
//     to be sealed, giving the hash of the arguments it read (mesh
//     migrate --apply); only the admin identity may send it.
//   - mesh.approval.*.decide: a decision in any of its three formats
//     ({"approved":true}, {"action":"approve"}, {"answer":"yes"}), with an
//     optional args_hash of the arguments the decider was shown. Who decided
//     is the Mesh-Principal header, else the body's "by". Before it approves,
//     the approver checks that the record still holds what it sealed (its
//     arguments hash to the sealed hash) and, when given, the decider's
//     args_hash; then it signs the decision ([mesh.ApprovalStatement]) and
//     moves the approval from pending to approved or rejected by
//     compare-and-set, so of two racing decisions exactly one wins and the
//     other gets a conflict. The winner publishes CUSTOM approval_decided to
//     the conversation's events and enqueues a resume work item on
//     mesh.work.agent.<agent>.<session> (deduplicated by the approval id), carrying the
//     decider's Authorization and X-Session-ID headers.
//
// At start it publishes its public key under _keys.<key> in mesh_approvals,
// for tool hosts that have no approvals.public_keys configured.
//
// An approver that dies between the decision and the enqueue leaves a decided
// approval without ResumeEnqueued; every approver watches the bucket and
// enqueues such resumes again after a short grace, so no decision is lost.
//
// [Role.Run] owns every goroutine it starts and returns nil after a clean
// drain once its context is cancelled.
package approver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// ServiceName is the micro service approvers register.
const ServiceName = mesh.ApprovalServiceName

// Config configures an approver.
type Config struct {
	// Node is the process's connections, names and logger. NC and JS are
	// required: the service is served on and answered from Responder (NC
	// when nil); JS writes the approvals, events and resumes. NodeID names
	// this process in logs and in the service metadata.
	role.Node
	// Approvals is the approvals bucket.
	Approvals jetstream.KeyValue
	// Signer is the approver's signing key (an nkey seed's key pair): it
	// signs every decision and seals every approval it creates. Required.
	Signer nkeys.KeyPair
	// Trusted are more public keys whose seals it honours: the keys of a
	// rotation, or of other approvers of the mesh. Signer's is always one.
	Trusted []string
	// Tools is the tool catalog, read to decide by
	// mesh.PolicyNonDestructive. Nil refuses that policy.
	Tools jetstream.KeyValue
	// Agents are the agents of the approver's own configuration, whose
	// trees decide mesh.PolicyAllowDestructive. Nil refuses that policy.
	Agents *config.Definition
	// Version is the build's version; the service announces it when it is
	// semver, else bus.DevVersion with it as build metadata, and in its
	// metadata.
	Version string
	// SweepInterval is how often decided approvals whose resume was never
	// enqueued are looked for. Zero means 2s.
	SweepInterval time.Duration
	// Grace is how long a decided approval may wait for its resume before a
	// sweep enqueues it again. Zero means 3s.
	Grace time.Duration
}

// Role is the approver role.
type Role struct {
	cfg       Config
	store     *store.ApprovalStore
	publisher *bus.Publisher
	log       zerolog.Logger
	key       string       // the Signer's public key
	trusted   *mesh.KeySet // keys whose seals are honoured
	now       func() time.Time

	mu     sync.Mutex
	orphan map[string]time.Time // decided approvals without an enqueued resume, by first sighting
	// pending are the approvals waiting for a person, for mesh_approvals_pending.
	pending map[string]time.Time
	// unsealed are the pending approvals without a seal already warned of.
	unsealed map[string]struct{}
}

// New validates cfg and returns an approver.
func New(cfg Config) (*Role, error) {
	if cfg.NC == nil || cfg.JS == nil || cfg.Approvals == nil || cfg.Signer == nil {
		return nil, errors.New("approver: NC, JS, Approvals and Signer are required")
	}
	key := identity.PublicKey(cfg.Signer)
	if _, err := cfg.Signer.Sign([]byte("probe")); err != nil || key == "" {
		return nil, fmt.Errorf("approver: Signer cannot sign: %v", err)
	}
	trusted, err := mesh.NewKeySet(append([]string{key}, cfg.Trusted...)...)
	if err != nil {
		return nil, fmt.Errorf("approver: Trusted: %w", err)
	}
	if cfg.NS.Prefix() == "" {
		cfg.NS = mesh.DefaultNamespace()
	}
	if cfg.Responder == nil {
		cfg.Responder = cfg.NC
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 2 * time.Second
	}
	if cfg.Grace == 0 {
		cfg.Grace = 3 * time.Second
	}
	return &Role{
		cfg:       cfg,
		store:     store.NewApprovalStore(cfg.Approvals),
		publisher: bus.NewPublisher(cfg.JS, cfg.NS),
		log:       cfg.Logger,
		key:       key,
		trusted:   trusted,
		now:       time.Now,
		orphan:    map[string]time.Time{},
		pending:   map[string]time.Time{},
		unsealed:  map[string]struct{}{},
	}, nil
}

// Run serves decisions until ctx is cancelled.
func (a *Role) Run(ctx context.Context) error {
	telemetry.Approvals([]string{mesh.PolicyNonDestructive, mesh.PolicyAllowDestructive})
	version, ok := bus.ServiceVersion(a.cfg.Version)
	meta := map[string]string{"node": a.cfg.NodeID}
	if !ok && a.cfg.Version != "" {
		meta["version"] = a.cfg.Version // a build that is not semver (a git hash)
	}
	svc, err := micro.AddService(a.cfg.Responder, micro.Config{
		Name:        ServiceName,
		Version:     version,
		Description: "Agent Mesh approvals: ask on request; decide with {\"approved\":true}, {\"action\":\"approve\"} or {\"answer\":\"yes\"}",
		QueueGroup:  ServiceName,
		Metadata:    meta,
	})
	if err != nil {
		return fmt.Errorf("approver: add service: %w", err)
	}
	// Decisions run on their own context: a decision being written when the
	// role is asked to stop is finished, not abandoned half-way.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	// inflight counts the requests being handled; the drain waits for them.
	// A request delivered after the drain began is refused (another
	// approver takes it when the caller retries): counting it then would
	// add to a WaitGroup already waited on.
	var (
		wg       sync.WaitGroup
		wgMu     sync.Mutex
		draining bool
	)
	enter := func() bool {
		wgMu.Lock()
		defer wgMu.Unlock()
		if draining {
			return false
		}
		wg.Add(1)
		return true
	}
	if err := a.publishKey(ctx); err != nil {
		_ = svc.Stop()
		if workloop.StoppedStarting(ctx, err) {
			return nil
		}
		return err
	}
	for _, ep := range []struct {
		name, subject string
		handle        func(context.Context, micro.Request)
	}{
		{"request", a.cfg.NS.ApprovalRequestAll(), a.handleRequest},
		{"decide", a.cfg.NS.ApprovalDecideAll(), a.handleDecide},
		{"reseal", a.cfg.NS.ApprovalResealAll(), a.handleReseal},
	} {
		err = svc.AddEndpoint(ep.name, micro.HandlerFunc(func(req micro.Request) {
			if !enter() {
				_ = mesh.RespondError(req, mesh.ErrUnavailable.With("approver: stopping"))
				return
			}
			defer wg.Done()
			ep.handle(work, req)
		}), micro.WithEndpointSubject(ep.subject))
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("approver: add endpoint %s: %w", ep.name, err)
		}
	}
	// Decided approvals without a resume, for the sweep. A watch that ends
	// (a reconnect) is opened again, in a moment.
	watched, err := store.WatchKV(ctx, a.cfg.Approvals, store.KVWatch{
		IgnoreDeletes: true,
		Apply:         a.track,
		Reopen:        250 * time.Millisecond,
		Retry:         time.Second,
		Retrying:      func(err error) { a.log.Warn().Err(err).Msg("watch approvals; retrying") },
	})
	if err != nil {
		_ = svc.Stop()
		if workloop.StoppedStarting(ctx, err) {
			return nil
		}
		return fmt.Errorf("approver: watch approvals: %w", err)
	}
	a.log.Info().Str("subject", a.cfg.NS.ApprovalDecideAll()).Str("key", a.key).Msg("approver ready")

	ticker := time.NewTicker(a.cfg.SweepInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			err := svc.Stop()
			<-watched // the watch stops with ctx
			wgMu.Lock()
			draining = true
			wgMu.Unlock()
			wg.Wait()
			if err != nil {
				return fmt.Errorf("approver: stop service: %w", err)
			}
			a.log.Info().Msg("approver stopped")
			return nil
		case <-ticker.C:
			a.sweep(work)
		}
	}
}

// publishKey writes the approver's public key under _keys.<key>, where
// tool hosts without configured keys learn it.
func (a *Role) publishKey(ctx context.Context) error {
	data, err := json.Marshal(mesh.ApproverKey{Key: a.key, Node: a.cfg.NodeID, At: a.now().UTC()})
	if err != nil {
		return fmt.Errorf("approver: encode key: %w", err)
	}
	if _, err := a.cfg.Approvals.Put(ctx, mesh.ApprovalKeysPrefix+a.key, data); err != nil {
		return fmt.Errorf("approver: publish key: %w", err)
	}
	return nil
}

// track remembers decided approvals whose resume was not enqueued yet.
// Policy decisions resume nothing: their call runs at once.
func (a *Role) track(e jetstream.KeyValueEntry) {
	if strings.HasPrefix(e.Key(), "_") {
		return // not an approval: a published key
	}
	var ap mesh.Approval
	if json.Unmarshal(e.Value(), &ap) != nil || ap.Policy != "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.countPending(ap.UUID, ap.Status == mesh.ApprovalPending, ap.CreatedAt)
	if ap.Unsealed() {
		if _, told := a.unsealed[ap.UUID]; !told {
			a.unsealed[ap.UUID] = struct{}{}
			withSID(a.log.Warn().Str("approval", ap.UUID).Str("session", ap.ConversationID), ap.SessionID).
				Msg("a pending approval has no seal, so it cannot be approved: an admin reads it with `mesh migrate` and seals it with `mesh migrate --apply`, or rejects it")
		}
	}
	if ap.Status != mesh.ApprovalPending && !ap.ResumeEnqueued {
		if _, seen := a.orphan[ap.UUID]; !seen {
			a.orphan[ap.UUID] = time.Now()
		}
		return
	}
	delete(a.orphan, ap.UUID)
}

// sweep enqueues the resumes that their decider did not.
func (a *Role) sweep(ctx context.Context) {
	a.mu.Lock()
	var due []string
	for id, since := range a.orphan {
		if time.Since(since) >= a.cfg.Grace {
			due = append(due, id)
		}
	}
	a.mu.Unlock()
	for _, id := range due {
		ap, err := a.store.Get(ctx, id)
		if err != nil {
			a.log.Warn().Err(err).Str("approval", id).Msg("sweep: read approval")
			continue
		}
		if ap.ResumeEnqueued || ap.Status == mesh.ApprovalPending {
			continue
		}
		a.log.Warn().Str("approval", id).Str("session", ap.ConversationID).Msg("enqueueing a resume its decider did not")
		// The decider's token is gone with it: tokens are never stored.
		if err := a.enqueueResume(ctx, ap, nats.Header{}); err != nil {
			a.log.Error().Err(err).Str("approval", id).Msg("sweep: enqueue resume")
		}
	}
}

func (a *Role) handleDecide(ctx context.Context, req micro.Request) {
	id := approvalIDFromSubject(req.Subject())
	log := a.log.With().Str("approval", id).Logger()
	if err := mesh.CheckToken(id); err != nil {
		_ = mesh.RespondError(req, mesh.ErrApprovalNotFound.With(fmt.Sprintf("approval %q not found", id)))
		return
	}
	d, err := mesh.ParseDecision(req.Data())
	if err != nil {
		_ = mesh.RespondError(req, err)
		return
	}
	hdr := nats.Header(req.Headers())
	if p := hdr.Get(mesh.HeaderPrincipal); p != "" {
		d.By = p // the authenticated principal, not what the body claims
	}
	if d.By == "" {
		d.By = "nats"
	}
	d.ID = hdr.Get(mesh.HeaderDecisionID)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ap, err := a.Decide(telemetry.Extract(ctx, hdr), id, d, hdr)
	if err != nil {
		if errors.Is(err, mesh.ErrApprovalDecided) {
			// Say what the first decision was: the caller may be retrying.
			if cur, gerr := a.store.Get(ctx, id); gerr == nil {
				data, _ := json.Marshal(cur)
				h := mesh.ErrorHeaders(err)
				_ = req.Error(h.Get(mesh.HeaderServiceErrorCode), h.Get(mesh.HeaderServiceError), data, micro.WithHeaders(micro.Headers(h)))
				return
			}
		}
		if mesh.HTTPStatus(err) >= 500 {
			log.Error().Err(err).Msg("decide")
		}
		_ = mesh.RespondError(req, err)
		return
	}
	withSID(log.Info().Str("session", ap.ConversationID), ap.SessionID).Bool("approved", d.Approved).Str("by", d.By).Msg("approval decided")
	_ = req.RespondJSON(ap)
}

// Decide signs d and records it on the approval, publishes
// approval_decided and enqueues the resume. hdr carries the decider's
// credentials to the resumed run. An approval whose record no longer holds
// what was sealed, or whose arguments differ from those the decider was
// shown (d.ArgsHash), is not approved.
func (a *Role) Decide(ctx context.Context, id string, d mesh.Decision, hdr nats.Header) (*mesh.Approval, error) {
	again := false
	ap, err := a.store.Update(ctx, id, func(ap *mesh.Approval) error {
		if ap.Status != mesh.ApprovalPending {
			if d.ID != "" && ap.Decision != nil && ap.Decision.ID == d.ID {
				// This very request, sent again after its answer was lost.
				again = true
				return store.ErrNoChange
			}
			return mesh.ErrApprovalDecided.With(fmt.Sprintf("approval %s was already %s", id, ap.Status))
		}
		status := mesh.ApprovalRejected
		if d.Approved {
			status = mesh.ApprovalApproved
			if err := a.checkIntact(ap); err != nil {
				return err
			}
			if d.ArgsHash != "" && d.ArgsHash != ap.ArgsHash {
				return mesh.ErrApprovalArgsChanged.With(fmt.Sprintf("approval %s: the arguments shown (hash %s) are not the approval's (hash %s): look at it again before approving", id, short(d.ArgsHash), ap.ArgsHash))
			}
		}
		now := a.now().UTC()
		st, err := a.sign(ap, status, d.By, now)
		if err != nil {
			return err
		}
		dec := d
		dec.Statement = st
		ap.Status, ap.Decision, ap.DecidedAt = status, &dec, now
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !again {
		telemetry.ApprovalDecided(d.Approved, ap.DecidedAt.Sub(ap.CreatedAt))
	}
	// The event belongs to no run: it falls between the paused run and its
	// resume. It is informative; the resume is what matters. Both carry
	// ids, so the first request's copies and a repeat's are stored once.
	if _, err := a.publisher.Publish(ctx, ap.ConversationID, "", "approval_decided:"+ap.UUID, mesh.Custom(mesh.CustomApprovalDecided, ap.Public())); err != nil {
		a.log.Warn().Err(err).Str("approval", id).Msg("publish approval_decided")
	}
	if ap.ResumeEnqueued {
		return ap, nil
	}
	if err := a.enqueueResume(ctx, ap, hdr); err != nil {
		// The decision stands; a sweep enqueues the resume later.
		a.log.Error().Err(err).Str("approval", id).Msg("enqueue resume")
		return ap, nil
	}
	ap.ResumeEnqueued = true
	return ap, nil
}

func (a *Role) enqueueResume(ctx context.Context, ap *mesh.Approval, hdr nats.Header) error {
	item := mesh.WorkItem{Kind: mesh.WorkResume, Session: ap.ConversationID, TurnID: ap.UUID, ApprovalID: ap.UUID}
	h := workloop.CopyCallerHeaders(hdr)
	if h.Get(mesh.HeaderSessionID) == "" && ap.SessionID != "" {
		h.Set(mesh.HeaderSessionID, ap.SessionID)
	}
	ctx, end := resumeSpan(ctx, ap, h)
	defer end()
	if err := workloop.Publish(ctx, a.cfg.JS, a.cfg.NS, mesh.RoleAgent, ap.Agent, item, h); err != nil {
		return err
	}
	_, err := a.store.Update(ctx, ap.UUID, func(cur *mesh.Approval) error {
		if cur.ResumeEnqueued {
			return store.ErrNoChange
		}
		cur.ResumeEnqueued = true
		return nil
	})
	return err
}

// approvalIDFromSubject takes <uuid> out of <prefix>.approval.<uuid>.decide.
func approvalIDFromSubject(subj string) string {
	parts := strings.Split(subj, ".")
	if len(parts) < 4 {
		return ""
	}
	return parts[len(parts)-2]
}
