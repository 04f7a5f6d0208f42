package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
)

// seenMsg is one message the admin saw on the bus.
type seenMsg struct {
	subject string
	header  nats.Header
	data    []byte
}

// tap records every message of the mesh's NATS server, as the admin sees
// them (subscribed to >): core requests, stream publishes, and what
// JetStream delivers to the roles' inboxes.
type tap struct {
	mu   sync.Mutex
	msgs []seenMsg
}

func tapAll(t *testing.T, nc *nats.Conn) *tap {
	t.Helper()
	tp := &tap{}
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		tp.mu.Lock()
		tp.msgs = append(tp.msgs, seenMsg{m.Subject, m.Header, bytes.Clone(m.Data)})
		tp.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return tp
}

// A caller's bearer token and a model API key, after a run with tools and
// an approval: in no log line, KV value, stream payload, nor in a NATS
// header on a subject that a role which does not need it can read.
func TestSecretsStayWhereTheyAreNeeded(t *testing.T) {
	t.Parallel()
	token := "Bearer tok-" + mesh.NewID()
	apiKey := "sk-ant-trust-" + mesh.NewID()
	m := startMesh(t, meshOpts{env: []string{"ANTHROPIC_API_KEY=" + apiKey, "GEMINI_API_KEY=" + apiKey, "OPENAI_API_KEY=" + apiKey}})
	admin := m.adminNATS(t)
	tp := tapAll(t, admin)

	conv, _ := m.firstTurn("list all resources", "Authorization", token)
	out := m.send(conv, "add resource secret-test with value 3", "Authorization", token)
	ap := obj(out, "result", "approval")
	if str(ap, "uuid") == "" {
		t.Fatalf("no approval: %v", out)
	}
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true}, "Authorization", token)
	if n := m.resourceRows("secret-test"); n != 1 {
		t.Fatalf("rows = %d, want the approved call run once", n)
	}
	time.Sleep(time.Second) // the last saves and heartbeats

	secrets := map[string]string{"the bearer token": strings.TrimPrefix(token, "Bearer "), "the API key": apiKey}
	for what, s := range secrets {
		if strings.Contains(m.logs(), s) {
			t.Errorf("%s is in the mesh's log", what)
		}
	}

	// Stored: every message of every stream (the buckets are streams too).
	for _, stream := range storedStreams(t, admin) {
		for _, msg := range readStream(t, admin, stream) {
			for what, s := range secrets {
				if bytes.Contains(msg.data, []byte(s)) || headerHas(msg.header, s) {
					t.Errorf("%s is stored in %s (%s)", what, stream, msg.subject)
				}
			}
		}
	}

	// On the wire: in a payload never; in a header only on subjects that
	// only the roles forwarding it can read.
	ns := mesh.DefaultNamespace()
	streams := map[string]string{ns.Stream(mesh.StreamWork): ns.WorkAll(), ns.Stream(mesh.StreamEvents): ns.EventsAll()}
	// The bridge takes it from the caller; agents and groups forward it to
	// sub-agents; approvers put the decider's on the resume. The toolhost
	// would need it only for HTTP MCP servers, and this mesh has none.
	needers := []string{mesh.RoleBridge, mesh.RoleAgent, mesh.RoleGroup, mesh.RoleApprover}
	carried := map[string]bool{}
	tp.mu.Lock()
	msgs := slices.Clone(tp.msgs)
	tp.mu.Unlock()
	for _, msg := range msgs {
		for what, s := range secrets {
			if bytes.Contains(msg.data, []byte(s)) {
				t.Errorf("%s is in the payload of a message on %s", what, msg.subject)
			}
			if !headerHas(msg.header, s) {
				continue
			}
			if what == "the API key" {
				t.Errorf("the API key is in a header on %s", msg.subject)
				continue
			}
			switch {
			case strings.HasPrefix(msg.subject, "mesh.work."):
				carried["work"] = true
			case strings.HasSuffix(msg.subject, ".decide"):
				carried["decide"] = true
			case strings.HasPrefix(msg.subject, "mesh.evt."), strings.HasPrefix(msg.subject, "$KV."), strings.HasPrefix(msg.subject, "mesh.tool."):
				t.Errorf("the bearer token rides on %s", msg.subject)
			}
			for _, role := range identity.Roles() {
				p, _ := identity.PermissionsOf(ns, role)
				if p.CanRead(msg.subject, streams) && !slices.Contains(needers, role) {
					t.Errorf("the bearer token rides on %s, which the %s can read", msg.subject, role)
				}
			}
		}
	}
	// It did travel where it must: the test saw it.
	if !carried["work"] || !carried["decide"] {
		t.Errorf("the token was seen on work %v, on decisions %v; want both (else the tap saw nothing)", carried["work"], carried["decide"])
	}
	if len(msgs) < 50 {
		t.Errorf("the tap saw %d messages", len(msgs))
	}
}

func headerHas(h nats.Header, s string) bool {
	for _, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}

func storedStreams(t *testing.T, nc *nats.Conn) []string {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	lister := js.StreamNames(t.Context())
	for n := range lister.Name() {
		names = append(names, n)
	}
	if len(names) < 7 {
		t.Fatalf("streams %v, want the mesh's two and five buckets", names)
	}
	return names
}

// readStream reads every message a stream holds.
func readStream(t *testing.T, nc *nats.Conn, stream string) []seenMsg {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []seenMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("%s seq %d: %v", stream, seq, err)
		}
		out = append(out, seenMsg{raw.Subject, raw.Header, raw.Data})
	}
	return out
}
