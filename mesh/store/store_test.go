package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

func TestSessionStoreCompareAndSet(t *testing.T) {
	m := meshtest.New(t)
	sessions := store.NewSessionStore(m.Sessions, m.Messages)
	ctx := t.Context()
	conv := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Status: mesh.StatusActive}
	if err := sessions.Create(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if err := sessions.Create(ctx, conv); err == nil {
		t.Fatal("creating an existing conversation succeeded")
	}

	// 20 writers append concurrently; compare-and-set with re-apply must
	// keep every message exactly once.
	const writers = 20
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("m%d", i)
			_, err := sessions.Update(ctx, conv.ID, func(c *mesh.Conversation) error {
				if c.HasMessage(id) {
					return store.ErrNoChange
				}
				c.Messages = append(c.Messages, mesh.Message{ID: id, Role: mesh.RoleUser, Content: id})
				return nil
			})
			if err != nil {
				t.Errorf("update %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
	got, err := sessions.Get(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != writers {
		t.Fatalf("messages = %d, want %d", len(got.Messages), writers)
	}
	seen := map[string]bool{}
	for _, msg := range got.Messages {
		if seen[msg.ID] {
			t.Errorf("message %s twice", msg.ID)
		}
		seen[msg.ID] = true
	}
	if got.Version != writers+1 {
		t.Errorf("version = %d, want %d", got.Version, writers+1)
	}

	// A stale copy is re-applied on top of the newer revision, not written over it.
	stale := got
	if _, err := sessions.Update(ctx, conv.ID, func(c *mesh.Conversation) error { c.Status = mesh.StatusRunning; return nil }); err != nil {
		t.Fatal(err)
	}
	after, err := sessions.UpdateLoaded(ctx, stale, func(c *mesh.Conversation) error {
		c.State = map[string]any{"k": "v"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != mesh.StatusRunning || after.State["k"] != "v" {
		t.Errorf("after stale update: status %q state %v; want running and k=v", after.Status, after.State)
	}

	// A change can refuse.
	refusal := errors.New("no")
	if _, err := sessions.Update(ctx, conv.ID, func(*mesh.Conversation) error { return refusal }); !errors.Is(err, refusal) {
		t.Errorf("refusal: err = %v", err)
	}
	if _, err := sessions.Get(ctx, "missing"); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("missing: err = %v", err)
	}
	if _, err := sessions.Get(ctx, "bad.id"); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("bad id: err = %v", err)
	}
}

func TestApprovalStoreDecideOnce(t *testing.T) {
	m := meshtest.New(t)
	approvals := store.NewApprovalStore(m.Approvals)
	ctx := t.Context()
	ap := &mesh.Approval{UUID: mesh.NewID(), ConversationID: "c", ToolCallID: "t", ToolName: "resources_add"}
	if err := approvals.Create(ctx, ap); err != nil {
		t.Fatal(err)
	}
	// Creating it again with the same content (a redelivered turn) is fine.
	if err := approvals.Create(ctx, &mesh.Approval{UUID: ap.UUID, ConversationID: "c", ToolCallID: "t"}); err != nil {
		t.Fatalf("idempotent create: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := approvals.Decide(ctx, ap.UUID, mesh.Decision{Approved: i%2 == 0})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, mesh.ErrApprovalDecided):
				conflicts++
			default:
				t.Errorf("decide: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != 9 {
		t.Errorf("wins %d conflicts %d, want 1 and 9", wins, conflicts)
	}
	if _, err := approvals.Decide(ctx, "unknown", mesh.Decision{}); !errors.Is(err, mesh.ErrApprovalNotFound) {
		t.Errorf("unknown: err = %v", err)
	}
}

// A record of one approval put under another's id (as a reply aimed at the
// bucket did) is refused by every reader and writer, never taken for the
// approval the key names.
func TestApprovalStoreRefusesARecordUnderAnotherKey(t *testing.T) {
	m := meshtest.New(t)
	approvals := store.NewApprovalStore(m.Approvals)
	ctx := t.Context()
	victim := &mesh.Approval{UUID: mesh.NewID(), ConversationID: "c", ToolCallID: "t", ToolName: "resources_add"}
	if err := approvals.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	other := &mesh.Approval{UUID: mesh.NewID(), ConversationID: "c", ToolCallID: "t2", ToolName: "resources_remove"}
	data, _ := json.Marshal(other)
	if _, err := m.Approvals.Put(ctx, victim.UUID, data); err != nil {
		t.Fatal(err)
	}
	if ap, err := approvals.Get(ctx, victim.UUID); !errors.Is(err, mesh.ErrApprovalTampered) {
		t.Errorf("get: %+v, %v; want approval_tampered", ap, err)
	}
	if ap, err := approvals.Decide(ctx, victim.UUID, mesh.Decision{Approved: true}); !errors.Is(err, mesh.ErrApprovalTampered) {
		t.Errorf("decide: %+v, %v; want approval_tampered", ap, err)
	}
	if list, err := approvals.List(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("list: %d approvals, %v; want none", len(list), err)
	}
}

// The catalog believes an entry only under its own key: a value that is no
// entry, or another tool's entry, is left out, and the rest is listed.
func TestCatalogListsOnlyEntriesUnderTheirKeys(t *testing.T) {
	m := meshtest.New(t)
	ctx := t.Context()
	for key, v := range map[string]any{
		"srv.list":   mesh.ToolEntry{Server: "srv", Name: "list", ReadOnlyHint: true},
		"srv.remove": map[string]any{"text": "a tool's result"},
		"srv.add":    mesh.ToolEntry{Server: "srv", Name: "list", ReadOnlyHint: true},
		"srv.broken": "not json at all",
	} {
		data, _ := json.Marshal(v)
		if key == "srv.broken" {
			data = []byte("{")
		}
		if _, err := m.Tools.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}
	tools, err := store.NewCatalog(m.Tools).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Name != "list" {
		t.Errorf("catalog = %+v, want srv.list alone", tools)
	}
}

func TestProvisionIsIdempotent(t *testing.T) {
	m := meshtest.New(t)
	for range 2 {
		if _, err := store.Provision(t.Context(), m.JS, m.NS, store.ProvisionConfig{}); err != nil {
			t.Fatalf("provision again: %v", err)
		}
	}
}

// Provisioning marks every stream, bucket and object store with the
// stored format; a stream marked newer than this release is refused, by
// provisioning and by a role binding it, with both versions named, and is
// left as it was.
func TestNewerStoredFormatIsRefused(t *testing.T) {
	m := meshtest.New(t)
	ctx := t.Context()
	for _, name := range []string{m.NS.Stream(mesh.StreamEvents), "KV_" + m.NS.Bucket(mesh.BucketSessions), "OBJ_" + m.NS.Bucket(mesh.BucketFiles)} {
		s, err := m.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Metadata[store.FormatKey]; got != fmt.Sprint(mesh.StoreFormat) {
			t.Errorf("%s: %s = %q, want %d", name, store.FormatKey, got, mesh.StoreFormat)
		}
	}
	for _, name := range []string{m.NS.Stream(mesh.StreamWork), "KV_" + m.NS.Bucket(mesh.BucketApprovals)} {
		s, err := m.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Metadata = map[string]string{store.FormatKey: fmt.Sprint(mesh.StoreFormat + 1)}
		if _, err := m.JS.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("stream %s holds stored format %d, and this mesh (%s) reads format %d", name, mesh.StoreFormat+1, mesh.Release, mesh.StoreFormat)
		_, err = store.Provision(ctx, m.JS, m.NS, store.ProvisionConfig{})
		if !errors.Is(err, store.ErrNewerFormat) || !strings.Contains(err.Error(), want) {
			t.Errorf("provision over %s: %v, want %q", name, err, want)
		}
		uses := store.Uses{Streams: []string{mesh.StreamWork}}
		if strings.HasPrefix(name, "KV_") {
			uses = store.Uses{Buckets: []string{mesh.BucketApprovals}}
		}
		if _, err := store.Bind(ctx, m.JS, m.NS, uses); !errors.Is(err, store.ErrNewerFormat) {
			t.Errorf("bind %s: %v, want ErrNewerFormat", name, err)
		}
		s, _ = m.JS.Stream(ctx, name)
		if got := s.CachedInfo().Config.Metadata[store.FormatKey]; got != fmt.Sprint(mesh.StoreFormat+1) {
			t.Errorf("%s after the refusals: format %q, want it untouched", name, got)
		}
		cfg.Metadata[store.FormatKey] = fmt.Sprint(mesh.StoreFormat)
		if _, err := m.JS.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
}

// A run id is reserved by the first conversation that uses it: that one
// may use it again, another learns who holds it, and the reservations are
// no conversations.
func TestSessionStoreReserveRun(t *testing.T) {
	m := meshtest.New(t)
	sessions := store.NewSessionStore(m.Sessions, m.Messages)
	ctx := t.Context()
	a, b := mesh.NewID(), mesh.NewID()
	for _, id := range []string{a, b} {
		if err := sessions.Create(ctx, &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Status: mesh.StatusActive}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ conv, want string }{{a, a}, {a, a}, {b, a}} {
		got, err := sessions.ReserveRun(ctx, "run-1", tt.conv)
		if err != nil || got != tt.want {
			t.Errorf("ReserveRun(run-1, %s) = %q, %v; want %q", tt.conv, got, err, tt.want)
		}
	}
	if _, err := sessions.ReserveRun(ctx, "run.1", a); !errors.Is(err, mesh.ErrBadRequest) {
		t.Errorf("a run id that is no id: %v", err)
	}
	list, err := sessions.List(ctx)
	if err != nil || len(list) != 2 {
		t.Errorf("List = %d conversations, %v; want 2", len(list), err)
	}
}

// A role binds every bucket and stream its permissions name, and nothing
// else: the bridge reads queued work items by subject from MESH_WORK.
func TestBindTheRolesResources(t *testing.T) {
	m := meshtest.New(t)
	p, _ := identity.PermissionsOf(m.NS, mesh.RoleBridge)
	r, err := store.Bind(t.Context(), m.JS, m.NS, store.Uses{Buckets: p.Buckets, Streams: p.Streams, Objects: p.Objects})
	if err != nil {
		t.Fatal(err)
	}
	if r.Work == nil || r.Sessions == nil || r.Events != nil {
		t.Errorf("bridge bound work %v, sessions %v, events %v; want work and sessions, not events", r.Work != nil, r.Sessions != nil, r.Events != nil)
	}
	p, _ = identity.PermissionsOf(m.NS, mesh.RoleToolhost)
	if r, err = store.Bind(t.Context(), m.JS, m.NS, store.Uses{Buckets: p.Buckets, Streams: p.Streams, Objects: p.Objects}); err != nil || r.Work != nil || r.Sessions != nil {
		t.Errorf("toolhost bound work %v, sessions %v (err %v)", r != nil && r.Work != nil, r != nil && r.Sessions != nil, err)
	}
}

// TestConversationDoc: a head written by UpdateHead keeps the messages
// as they were, changes the head, and decodes as the conversation.
func TestConversationDoc(t *testing.T) {
	m := meshtest.New(t)
	s := store.NewSessionStore(m.Sessions, m.Messages)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), SessionID: "0a1b2c3d", Agent: "a", Status: mesh.StatusActive,
		Messages: []mesh.Message{{ID: "m1", Role: mesh.RoleUser, Content: "<hi> & \u2028 \"there\""}, {ID: "m2", Role: mesh.RoleAssistant, Content: "ok", ToolCalls: []mesh.ToolCall{{ID: "c1", Name: "f", Arguments: map[string]any{"a": 1.0}}}}}}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	d, err := s.UpdateHead(ctx, c.ID, func(cv *mesh.Conversation) error {
		if cv.Messages != nil {
			t.Errorf("the change sees messages: %v", cv.Messages)
		}
		cv.Status = mesh.StatusQueued
		cv.Queued = &mesh.QueuedTurn{ID: "t1", Message: "hello"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.Agent != "a" {
		t.Fatalf("head after update: agent = %q, want a", d.Agent)
	}
	if d.Status != mesh.StatusQueued {
		t.Fatalf("head after update: status = %q, want %q", d.Status, mesh.StatusQueued)
	}
	if d.Version != 2 {
		t.Fatalf("head after update: version = %d, want 2", d.Version)
	}
	if d.Revision == 0 {
		t.Fatal("head after update: revision = 0, want the bucket's revision")
	}
	got, err := s.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != mesh.StatusQueued {
		t.Fatalf("conversation after update: status = %q, want %q", got.Status, mesh.StatusQueued)
	}
	if got.Queued == nil {
		t.Fatal("conversation after update: queued = nil, want turn t1")
	}
	if got.Queued.ID != "t1" {
		t.Fatalf("conversation after update: queued turn %q, want t1", got.Queued.ID)
	}
	if got.Version != 2 {
		t.Fatalf("conversation after update: version = %d, want 2", got.Version)
	}
	if got.Revision != d.Revision {
		t.Fatalf("conversation after update: revision = %d, want the head's %d", got.Revision, d.Revision)
	}
	want, _ := json.Marshal(c.Messages)
	have, _ := json.Marshal(got.Messages)
	if string(want) != string(have) {
		t.Fatalf("messages changed:\n%s\n%s", want, have)
	}
	doc, err := s.GetDoc(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The document encodes as the conversation it stands for.
	var a, b map[string]any
	ja, _ := json.Marshal(doc)
	jb, _ := json.Marshal(got)
	_ = json.Unmarshal(ja, &a)
	_ = json.Unmarshal(jb, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("document and conversation differ:\n%s\n%s", ja, jb)
	}
	if _, err := s.GetDoc(ctx, mesh.NewID()); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Fatalf("GetDoc of a missing id: %v", err)
	}
}
