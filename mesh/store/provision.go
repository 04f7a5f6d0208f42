package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// ProvisionConfig sizes the streams and buckets. The zero value is the
// development default.
type ProvisionConfig struct {
	// EventsMaxAge is how long events are kept. Zero means 7 days.
	EventsMaxAge time.Duration
	// DuplicateWindow is the deduplication window of both streams. Zero means 2 minutes.
	DuplicateWindow time.Duration
	// SessionHistory is how many revisions of each session are kept. Zero means 5.
	SessionHistory uint8
	// SessionTTL expires conversations that were not updated for that long. Zero means never.
	SessionTTL time.Duration
	// ExpiredKept is how long the sessions bucket keeps the limit marker of
	// a conversation that expired, so that it answers 410 expired meanwhile
	// (lifecycle.go). Zero means 24 hours. The bucket has limit markers
	// even without a TTL: NATS cannot turn them off again once on.
	ExpiredKept time.Duration
	// CallsTTL is how long tool call records are kept. Zero means 7 days.
	CallsTTL time.Duration
	// FilesMaxAge is how long conversations' files are kept (the object
	// store mesh_files's TTL). Zero means until deleted.
	FilesMaxAge time.Duration
	// Replicas is the replication factor of every stream and bucket. Zero
	// means: those that exist keep theirs, new ones get 3 when the server
	// is a cluster node and 1 otherwise. A stream or bucket that exists
	// with another count than a Replicas set is a [*ReplicasError].
	Replicas int
}

// ErrReplicas matches a [*ReplicasError] with errors.Is.
var ErrReplicas = errors.New("store: replica count differs")

// ReplicasError says that a stream or bucket exists with another replica
// count than provisioning asks for. Provisioning changes no replica count
// by itself: moving a stream's data between servers is the operator's call.
type ReplicasError struct {
	Stream     string // the stream (a bucket's is KV_<bucket>)
	Have, Want int
}

func (e *ReplicasError) Error() string {
	return fmt.Sprintf("stream %s has %d replica(s) but nats.replicas asks for %d: set nats.replicas to %d (or leave it unset), "+
		"or change the stream with `nats stream edit %s --replicas %d` as the admin first", e.Stream, e.Have, e.Want, e.Have, e.Stream, e.Want)
}

// Is makes errors.Is(err, ErrReplicas) true.
func (e *ReplicasError) Is(target error) bool { return target == ErrReplicas }

// FormatKey is the metadata key of every stream, bucket and object store
// the mesh provisions: the stored format ([mesh.StoreFormat]) of what they
// hold. A release refuses, before it serves, one written by a newer release.
const FormatKey = "agentmesh.store_format"

// ErrNewerFormat: a stream holds a stored format newer than this release
// reads.
var ErrNewerFormat = errors.New("store: stored by a newer release")

// FormatError says which stream is newer, and by how much.
type FormatError struct {
	Stream     string
	Have, Want int
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("stream %s holds stored format %d, and this mesh (%s) reads format %d and older: "+
		"run the release that wrote it or a newer one (CHANGELOG.md names each release's stored format)", e.Stream, e.Have, mesh.Release, e.Want)
}

func (e *FormatError) Is(target error) bool { return target == ErrNewerFormat }

// checkFormat refuses stream info written by a newer stored format; a
// stream without the key predates it (format 1).
func checkFormat(info *jetstream.StreamInfo) error {
	if info == nil {
		return nil
	}
	have, err := formatOf(info)
	if err != nil {
		return err
	}
	if have > mesh.StoreFormat {
		return &FormatError{Stream: info.Config.Name, Have: have, Want: mesh.StoreFormat}
	}
	return nil
}

// formatOf is the stored format a stream's metadata names, 0 when none.
func formatOf(info *jetstream.StreamInfo) (int, error) {
	v, ok := info.Config.Metadata[FormatKey]
	if !ok {
		return 0, nil
	}
	have, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("stream %s: metadata %s is %q, not a format number", info.Config.Name, FormatKey, v)
	}
	return have, nil
}

// formatMetadata is the metadata a provisioned stream carries.
func formatMetadata() map[string]string {
	return map[string]string{FormatKey: strconv.Itoa(mesh.StoreFormat)}
}

func (c ProvisionConfig) withDefaults() ProvisionConfig {
	if c.EventsMaxAge == 0 {
		c.EventsMaxAge = 7 * 24 * time.Hour
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.SessionHistory == 0 {
		c.SessionHistory = 5
	}
	if c.ExpiredKept == 0 {
		c.ExpiredKept = 24 * time.Hour
	}
	if c.SessionTTL < 0 {
		c.SessionTTL = 0
	}
	if c.CallsTTL == 0 {
		c.CallsTTL = 7 * 24 * time.Hour
	}
	return c
}

// Resources are the provisioned streams and buckets of one mesh.
type Resources struct {
	NS        mesh.Namespace
	Events    jetstream.Stream
	Work      jetstream.Stream
	Sessions  jetstream.KeyValue
	Approvals jetstream.KeyValue
	Tools     jetstream.KeyValue
	Nodes     jetstream.KeyValue
	Calls     jetstream.KeyValue
	// Messages is the message log (MESH_MESSAGES) over the same
	// connection, for the roles that bind it.
	Messages *MessageLog
	Limits   jetstream.KeyValue
	// Usage is what principals spent on models, per day (mesh_usage).
	Usage jetstream.KeyValue
	// Replays holds the reports of replays (mesh_replays).
	Replays jetstream.KeyValue
	// Files holds conversations' files (the object store mesh_files).
	Files *FileStore
	// MovedWork counts the work items a release before 0.1.0 queued that
	// provisioning moved to this release's subjects ([MoveLegacyWork]).
	MovedWork int
}

// Provision creates or updates every stream and bucket of the mesh. It is
// idempotent. With NATS identities on, only the admin may run it (`mesh up`,
// `mesh nats`); a role binds what it uses instead ([BindRetry]). On an open
// server every role runs it at start, and the first one sets things up.
func Provision(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace, cfg ProvisionConfig) (*Resources, error) {
	cfg = cfg.withDefaults()
	r := &Resources{NS: ns}
	var err error
	r.Events, err = ensureStream(ctx, js, cfg.Replicas, jetstream.StreamConfig{
		Name:        ns.Stream(mesh.StreamEvents),
		Description: "Agent Mesh: every AG-UI event of every session",
		Subjects:    []string{ns.EventsAll()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      cfg.EventsMaxAge,
		Duplicates:  cfg.DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("provision stream %s: %w", ns.Stream(mesh.StreamEvents), err)
	}
	r.Work, err = ensureStream(ctx, js, cfg.Replicas, jetstream.StreamConfig{
		Name:        ns.Stream(mesh.StreamWork),
		Description: "Agent Mesh: work queue of turns and resumes",
		Subjects:    []string{ns.WorkAll()},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  cfg.DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("provision stream %s: %w", ns.Stream(mesh.StreamWork), err)
	}
	if _, err = ensureStream(ctx, js, cfg.Replicas, jetstream.StreamConfig{
		Name:        ns.Stream(mesh.StreamMessages),
		Description: "Agent Mesh: conversations' messages, one stream message per save",
		Subjects:    []string{ns.MessagesAll()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  cfg.DuplicateWindow,
		// Direct gets: reads of a conversation's records by sequence,
		// served by any replica.
		AllowDirect: true,
	}); err != nil {
		return nil, fmt.Errorf("provision stream %s: %w", ns.Stream(mesh.StreamMessages), err)
	}
	r.Messages = NewMessageLog(js, ns)
	buckets := []struct {
		dst  *jetstream.KeyValue
		conf jetstream.KeyValueConfig
	}{
		{&r.Sessions, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketSessions), Description: "Agent Mesh: conversations", History: cfg.SessionHistory, TTL: cfg.SessionTTL, LimitMarkerTTL: cfg.ExpiredKept}},
		{&r.Approvals, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketApprovals), Description: "Agent Mesh: approvals", History: 5}},
		{&r.Tools, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketTools), Description: "Agent Mesh: tool catalog"}},
		// Per-key TTLs (node liveness) need limit markers.
		{&r.Nodes, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketNodes), Description: "Agent Mesh: node liveness", LimitMarkerTTL: time.Minute}},
		{&r.Calls, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketCalls), Description: "Agent Mesh: tool call records", TTL: cfg.CallsTTL}},
		// Every write of a limit key carries its own TTL (ratelimit.go); in
		// memory: budgets lost with a server start again full, and the sets
		// of active conversations are checked against mesh_sessions anyway.
		{&r.Limits, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketLimits), Description: "Agent Mesh: request budgets and active conversations",
			LimitMarkerTTL: time.Minute, Storage: jetstream.MemoryStorage}},
		// A day's spend outlives a server restart; each write carries a TTL
		// of two days, so yesterday's keys go away by themselves.
		{&r.Usage, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketUsage), Description: "Agent Mesh: what principals spent on models, per day", LimitMarkerTTL: time.Minute}},
		// One report per replay run, kept until an operator removes it.
		{&r.Replays, jetstream.KeyValueConfig{Bucket: ns.Bucket(mesh.BucketReplays), Description: "Agent Mesh: reports of replays", MaxValueSize: MaxReportBytes}},
	}
	for _, b := range buckets {
		if b.conf.Storage != jetstream.MemoryStorage {
			b.conf.Storage = jetstream.FileStorage
		}
		kv, err := ensureKeyValue(ctx, js, cfg.Replicas, b.conf)
		if err != nil {
			return nil, fmt.Errorf("provision bucket %s: %w", b.conf.Bucket, err)
		}
		*b.dst = kv
	}
	obs, err := ensureObjectStore(ctx, js, cfg.Replicas, jetstream.ObjectStoreConfig{
		Bucket: ns.Bucket(mesh.BucketFiles), Description: "Agent Mesh: conversations' files", Storage: jetstream.FileStorage, TTL: max(cfg.FilesMaxAge, 0),
	})
	if err != nil {
		return nil, fmt.Errorf("provision object store %s: %w", ns.Bucket(mesh.BucketFiles), err)
	}
	r.Files = NewFileStore(obs)
	// A turn that a release before 0.1.0 queued runs after the upgrade.
	if r.MovedWork, _, err = MoveLegacyWork(ctx, js, ns, r.Work); err != nil {
		return nil, fmt.Errorf("provision stream %s: %w", ns.Stream(mesh.StreamWork), err)
	}
	return r, nil
}

// ensureObjectStore is [ensureStream] for an object store.
func ensureObjectStore(ctx context.Context, js jetstream.JetStream, replicas int, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	var err error
	if cfg.Replicas, err = replicasFor(ctx, js, "OBJ_"+cfg.Bucket, replicas); err != nil {
		return nil, err
	}
	cfg.Metadata = formatMetadata()
	obs, err := js.CreateObjectStore(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.UpdateObjectStore(ctx, cfg)
	}
	return obs, err
}

// ensureStream creates the stream, or updates it only when its configuration
// differs. The server takes a create with the stored configuration as a no-op,
// whereas an update rewrites the store's configuration while other roles may
// be creating consumers on it (a race inside nats-server's file store that
// every role starting at once used to hit).
func ensureStream(ctx context.Context, js jetstream.JetStream, replicas int, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var err error
	if cfg.Replicas, err = replicasFor(ctx, js, cfg.Name, replicas); err != nil {
		return nil, err
	}
	cfg.Metadata = formatMetadata()
	s, err := js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.UpdateStream(ctx, cfg)
	}
	return s, err
}

// ensureKeyValue is [ensureStream] for a bucket.
func ensureKeyValue(ctx context.Context, js jetstream.JetStream, replicas int, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var err error
	if cfg.Replicas, err = replicasFor(ctx, js, "KV_"+cfg.Bucket, replicas); err != nil {
		return nil, err
	}
	cfg.Metadata = formatMetadata()
	kv, err := js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.UpdateKeyValue(ctx, cfg)
	}
	return kv, err
}

// replicasFor is the replica count of stream: want, when it is set and the
// stream has it or does not exist yet; the stream's own when want is 0;
// else 3 on a cluster and 1 on a single server. An existing stream of a
// newer stored format is refused: provisioning would mark it older.
func replicasFor(ctx context.Context, js jetstream.JetStream, stream string, want int) (int, error) {
	s, err := js.Stream(ctx, stream)
	if err == nil {
		if err := checkFormat(s.CachedInfo()); err != nil {
			return 0, err
		}
	}
	switch {
	case err == nil:
		have := s.CachedInfo().Config.Replicas
		if want != 0 && have != want {
			return 0, &ReplicasError{Stream: stream, Have: have, Want: want}
		}
		return have, nil
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return 0, err
	case want != 0:
		return want, nil
	case js.Conn().ConnectedClusterName() != "":
		return DefaultClusterReplicas, nil
	}
	return 1, nil
}

// DefaultClusterReplicas is the replica count of new streams and buckets on
// a cluster when none is configured.
const DefaultClusterReplicas = 3

// ProvisionRetry runs [Provision] until it succeeds or ctx ends, so that a
// role started before its NATS server comes up waits for it.
func ProvisionRetry(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace, cfg ProvisionConfig, onRetry func(error)) (*Resources, error) {
	return retry(ctx, "provision", onRetry, func(ctx context.Context) (*Resources, error) { return Provision(ctx, js, ns, cfg) })
}

// Uses names what a process binds at start: the buckets, streams and
// object stores (base names) it reads or writes, as its identity's
// permissions list them.
type Uses struct {
	Buckets, Streams, Objects []string
}

// Bind looks up the buckets and streams a role uses (its [Permissions]:
// Buckets and Streams) and returns them as Resources; the others stay nil.
// It creates nothing: a role with an identity of its own may not.
func Bind(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace, p Uses) (*Resources, error) {
	r := &Resources{NS: ns}
	buckets := map[string]*jetstream.KeyValue{
		mesh.BucketSessions: &r.Sessions, mesh.BucketApprovals: &r.Approvals, mesh.BucketTools: &r.Tools,
		mesh.BucketNodes: &r.Nodes, mesh.BucketCalls: &r.Calls, mesh.BucketLimits: &r.Limits,
		mesh.BucketUsage:   &r.Usage,
		mesh.BucketReplays: &r.Replays,
	}
	for _, b := range p.Buckets {
		dst, ok := buckets[b]
		if !ok {
			return nil, fmt.Errorf("bind: unknown bucket %q", b)
		}
		kv, err := js.KeyValue(ctx, ns.Bucket(b))
		if err != nil {
			return nil, fmt.Errorf("bind bucket %s: %w", ns.Bucket(b), err)
		}
		// The lookup above read the bucket's stream info; this reads it again,
		// once per bucket at start, for its metadata.
		if st, err := js.Stream(ctx, "KV_"+ns.Bucket(b)); err == nil {
			if err := checkFormat(st.CachedInfo()); err != nil {
				return nil, err
			}
		}
		*dst = kv
	}
	for _, b := range p.Objects {
		if b != mesh.BucketFiles {
			return nil, fmt.Errorf("bind: unknown object store %q", b)
		}
		obs, err := js.ObjectStore(ctx, ns.Bucket(b))
		if err != nil {
			return nil, fmt.Errorf("bind object store %s: %w", ns.Bucket(b), err)
		}
		r.Files = NewFileStore(obs)
	}
	streams := map[string]*jetstream.Stream{mesh.StreamEvents: &r.Events, mesh.StreamWork: &r.Work, mesh.StreamMessages: new(jetstream.Stream)}
	for _, name := range p.Streams {
		dst, ok := streams[name]
		if !ok {
			return nil, fmt.Errorf("bind: unknown stream %q", name)
		}
		s, err := js.Stream(ctx, ns.Stream(name))
		if err != nil {
			return nil, fmt.Errorf("bind stream %s: %w", ns.Stream(name), err)
		}
		if err := checkFormat(s.CachedInfo()); err != nil {
			return nil, err
		}
		*dst = s
		if name == mesh.StreamMessages {
			r.Messages = NewMessageLog(js, ns)
		}
	}
	return r, nil
}

// BindRetry runs [Bind] until it succeeds or ctx ends, so that a role
// started before the mesh is provisioned waits for it.
func BindRetry(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace, p Uses, onRetry func(error)) (*Resources, error) {
	return retry(ctx, "bind", onRetry, func(ctx context.Context) (*Resources, error) { return Bind(ctx, js, ns, p) })
}

func retry(ctx context.Context, what string, onRetry func(error), attempt func(context.Context) (*Resources, error)) (*Resources, error) {
	wait := 100 * time.Millisecond
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := attempt(attemptCtx)
		cancel()
		if err == nil {
			return r, nil
		}
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, ErrReplicas) || errors.Is(err, ErrNewerFormat) {
			// Closed for good (its credentials refused), a replica count only
			// the operator can settle, or a newer release's data: waiting is
			// vain.
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if onRetry != nil {
			onRetry(err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		if wait < 2*time.Second {
			wait *= 2
		}
	}
}

// StreamFormat is the stored format of one stream (bucket, object store).
type StreamFormat struct {
	Stream string `json:"stream"`
	// Format is the stored format its metadata names; 0 when it names none:
	// a release before 0.1.0 created it (format 1), and the next provision
	// marks it.
	Format int `json:"format"`
}

// StoredFormats is the stored format of every stream, bucket and object
// store of the mesh in ns that exists, in the order [Provision] makes them.
func StoredFormats(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace) ([]StreamFormat, error) {
	names := []string{ns.Stream(mesh.StreamEvents), ns.Stream(mesh.StreamWork), ns.Stream(mesh.StreamMessages)}
	for _, b := range []string{mesh.BucketSessions, mesh.BucketApprovals, mesh.BucketTools, mesh.BucketNodes, mesh.BucketCalls, mesh.BucketLimits, mesh.BucketUsage} {
		names = append(names, "KV_"+ns.Bucket(b))
	}
	names = append(names, "OBJ_"+ns.Bucket(mesh.BucketFiles))
	var out []StreamFormat
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		f := StreamFormat{Stream: name}
		if f.Format, err = formatOf(s.CachedInfo()); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}
