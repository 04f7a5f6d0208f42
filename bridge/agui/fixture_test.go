package agui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/rest"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/nodes/agent"
	"github.com/agentmesh/agentmesh/nodes/approver"
)

// traceID is the X-Session-ID every request of the tests sends, so that the
// trace ids stored with conversations and approvals are the same each run.
const traceID = "trace-golden"

// script is an llm.Provider whose answers a test writes.
type script func(ctx context.Context, req llm.Request) (*llm.Response, error)

func (s script) Model() string { return "script" }
func (s script) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return s(ctx, req)
}

// fixture is a whole mesh in one process: an embedded JetStream server, an
// agent with the given model, an approver, a fake toolhost serving the
// resources tools, and a bridge core with the REST routes and this
// package's routes on an httptest server.
type fixture struct {
	t     *testing.T
	m     *meshtest.Mesh
	core  *core.Core
	srv   *httptest.Server
	store *store.SessionStore
	tools *meshtest.Resources
}

// newFixture starts the fixture; tweak adjusts the streaming config.
func newFixture(t *testing.T, p llm.Provider, tweak func(*Config)) *fixture {
	t.Helper()
	m := meshtest.New(t)
	f := &fixture{t: t, m: m, store: store.NewSessionStore(m.Sessions, m.Messages)}
	f.tools = meshtest.StartResources(t, m)

	cfg, err := config.Parse("test.yaml", []byte("name: tester\nllm:\n  model: offline\nmesh:\n  ack_wait: 2s\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-agent", Logger: zerolog.Nop()}, Resources: m.Resources, Agent: cfg, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, "agent", a.Run)
	ap, err := approver.New(approver.Config{Node: role.Node{NC: m.NC, JS: m.JS, NS: m.NS, NodeID: "test-approver", Logger: zerolog.Nop()}, Approvals: m.Approvals, Signer: meshtest.SigningKey(t), Tools: m.Tools})
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, "approver", ap.Run)

	c, err := core.New(core.Config{Node: role.Node{NC: m.NC, JS: m.JS, Logger: zerolog.Nop()}, Resources: m.Resources, Agent: cfg.Name, Prompt: cfg.Prompt})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	f.core = c

	mux := http.NewServeMux()
	rest.Register(mux, rest.Config{Core: c})
	acfg := Config{Core: c}
	if tweak != nil {
		tweak(&acfg)
	}
	Register(mux, acfg)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// post sends a JSON body and returns the response, whose body the caller
// closes.
func (f *fixture) post(ctx context.Context, path, body string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(mesh.HeaderSessionID, traceID)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

// stream posts and reads the whole answer, which must be a 200 SSE stream.
func (f *fixture) stream(path, body string) (*http.Response, string) {
	f.t.Helper()
	resp := f.post(f.t.Context(), path, body)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("POST %s %s: status %d: %s", path, body, resp.StatusCode, data)
	}
	return resp, string(data)
}

// decide decides an approval through REST and returns the run's result.
func (f *fixture) decide(uuid string, approved bool) core.Result {
	f.t.Helper()
	resp := f.post(f.t.Context(), "/approvals/"+uuid, fmt.Sprintf(`{"approved": %t}`, approved))
	defer resp.Body.Close()
	var body struct {
		Result core.Result `json:"result"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("POST /approvals/%s: status %d: %s", uuid, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, &body); err != nil {
		f.t.Fatalf("decision answer %s: %v", data, err)
	}
	return body.Result
}

// conversation reads a conversation.
func (f *fixture) conversation(id string) *mesh.Conversation {
	f.t.Helper()
	c, err := f.store.Get(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// sseEvents splits a stream into the data of its events.
func sseEvents(t *testing.T, stream string) []string {
	t.Helper()
	var out []string
	for _, block := range strings.Split(stream, "\n\n") {
		if block == "" {
			continue
		}
		for _, line := range strings.Split(block, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, data)
			}
		}
	}
	return out
}

// decode decodes one event's JSON.
func decode(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("event %s: %v", data, err)
	}
	return m
}

// lineReader reads a stream line by line as it comes.
type lineReader struct{ br *bufio.Reader }

func newLineReader(r io.Reader) *lineReader { return &lineReader{br: bufio.NewReader(r)} }

// next returns the next "data:" line's payload; ok is false at the end.
func (l *lineReader) next() (string, bool) {
	for {
		line, err := l.br.ReadString('\n')
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok {
			return data, true
		}
		if err != nil {
			return "", false
		}
	}
}
