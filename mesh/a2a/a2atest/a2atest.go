// Package a2atest starts, for tests, a remote agent built with the official
// Go SDK's server (github.com/a2aproject/a2a-go v0.3, package a2asrv, over
// JSON-RPC) on an httptest server: the sub-agent an agent of the mesh
// delegates to. It records every JSON-RPC request it receives with the
// Authorization and X-Session-ID headers that came with it, and can be told
// to ask for approvals (input-required), to fail, or to hide its card.
//
// A new task whose text asks for approval rounds (Options.Approvals) ends in
// input-required with the status message "Approve: <text>?"; a message with
// the task id and the text "approved" goes on to the next round or
// completes the task with the artifact "done: <text>"; "rejected" cancels
// it. Other tasks complete at once with the same artifact.
//
// The server stops when the test ends.
package a2atest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
)

// Options configure a test agent.
type Options struct {
	// Name and Description are the card's. Empty means "sub" and "A test
	// sub-agent".
	Name        string
	Description string
	// Skills are the names of the card's skills.
	Skills []string
	// Approvals is how many approvals a new task asks for before it
	// completes.
	Approvals int
	// ApprovalData adds to an input-required status message a data part
	// {"description": …}, as the mesh's own A2A server does.
	ApprovalData bool
}

// Request is one JSON-RPC request the agent received.
type Request struct {
	Method string
	// Authorization and SessionID are the request's headers; HasAuth says
	// whether an Authorization header was present at all.
	Authorization string
	HasAuth       bool
	SessionID     string
	// MessageID, TaskID and Text come from params.message.
	MessageID string
	TaskID    string
	Text      string
}

// Agent is a running test agent.
type Agent struct {
	// URL is the agent's base URL: its card is at URL + /.well-known/agent-card.json
	// and its JSON-RPC endpoint at URL + /invoke.
	URL    string
	Server *httptest.Server

	opts Options

	mu       sync.Mutex
	requests []Request
	done     map[string]int // completions by task id
	rounds   map[string]int // approvals granted by task id
	texts    map[string]string
	failNext int
	failCode int
	noCard   bool
	cardHits int
}

// Start starts a test agent.
func Start(t testing.TB, o Options) *Agent {
	t.Helper()
	if o.Name == "" {
		o.Name = "sub"
	}
	if o.Description == "" {
		o.Description = "A test sub-agent"
	}
	a := &Agent{opts: o, done: map[string]int{}, rounds: map[string]int{}, texts: map[string]string{}}
	mux := http.NewServeMux()
	a.Server = httptest.NewUnstartedServer(mux)
	a.Server.Start()
	t.Cleanup(a.Server.Close)
	a.URL = a.Server.URL

	card := &a2a.AgentCard{
		Name: o.Name, Description: o.Description, URL: a.URL + "/invoke", Version: "1.0.0",
		ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"},
	}
	for _, s := range o.Skills {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: strings.ReplaceAll(s, " ", "_"), Name: s, Description: s, Tags: []string{"test"}})
	}
	cardHandler := a2asrv.NewStaticAgentCardHandler(card)
	serveCard := func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.cardHits++
		hidden := a.noCard
		a.mu.Unlock()
		if hidden {
			http.NotFound(w, r)
			return
		}
		cardHandler.ServeHTTP(w, r)
	}
	mux.HandleFunc(a2asrv.WellKnownAgentCardPath, serveCard)
	mux.HandleFunc("/.well-known/agent.json", serveCard)
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(&executor{a: a}))
	mux.HandleFunc("/invoke", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		a.record(r, body)
		a.mu.Lock()
		fail := a.failNext > 0
		if fail {
			a.failNext--
		}
		code := a.failCode
		a.mu.Unlock()
		if fail {
			http.Error(w, "test agent told to fail", code)
			return
		}
		rpc.ServeHTTP(w, r)
	})
	return a
}

func (a *Agent) record(r *http.Request, body []byte) {
	var req struct {
		Method string `json:"method"`
		Params struct {
			Message struct {
				MessageID string `json:"messageId"`
				TaskID    string `json:"taskId"`
				Parts     []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
			ID string `json:"id"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &req)
	rec := Request{
		Method: req.Method, Authorization: r.Header.Get("Authorization"), SessionID: r.Header.Get("X-Session-ID"),
		MessageID: req.Params.Message.MessageID, TaskID: req.Params.Message.TaskID,
	}
	_, rec.HasAuth = r.Header["Authorization"]
	if rec.TaskID == "" {
		rec.TaskID = req.Params.ID
	}
	var texts []string
	for _, p := range req.Params.Message.Parts {
		texts = append(texts, p.Text)
	}
	rec.Text = strings.Join(texts, "\n")
	a.mu.Lock()
	a.requests = append(a.requests, rec)
	a.mu.Unlock()
}

// Requests returns the JSON-RPC requests received so far.
func (a *Agent) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.requests...)
}

// Sends returns the message/send requests received so far.
func (a *Agent) Sends() []Request {
	var out []Request
	for _, r := range a.Requests() {
		if r.Method == "message/send" {
			out = append(out, r)
		}
	}
	return out
}

// Completed counts the completions of a task: the effect a duplicate
// forward would repeat.
func (a *Agent) Completed(taskID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done[taskID]
}

// Fail makes the next n JSON-RPC requests fail with HTTP status code.
func (a *Agent) Fail(n, code int) {
	a.mu.Lock()
	a.failNext, a.failCode = n, code
	a.mu.Unlock()
}

// HideCard makes the card paths answer 404 (hidden) or the card again.
func (a *Agent) HideCard(hidden bool) {
	a.mu.Lock()
	a.noCard = hidden
	a.mu.Unlock()
}

// CardHits counts the requests for the card.
func (a *Agent) CardHits() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cardHits
}

// executor is the agent's a2asrv.AgentExecutor.
type executor struct{ a *Agent }

func textOf(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var out []string
	for _, p := range m.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			out = append(out, tp.Text)
		}
	}
	return strings.Join(out, "\n")
}

func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	a := e.a
	id := string(rc.TaskID)
	text := textOf(rc.Message)
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
		a.mu.Lock()
		a.texts[id] = text
		a.mu.Unlock()
		if a.opts.Approvals > 0 {
			return e.ask(ctx, rc, q, text, 1)
		}
		return e.complete(ctx, rc, q, text)
	}
	a.mu.Lock()
	orig := a.texts[id]
	a.mu.Unlock()
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "approved", "yes":
		a.mu.Lock()
		a.rounds[id]++
		round := a.rounds[id]
		a.mu.Unlock()
		if round < a.opts.Approvals {
			return e.ask(ctx, rc, q, orig, round+1)
		}
		return e.complete(ctx, rc, q, orig)
	case "rejected", "no":
		ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: "cancelled: " + orig + " was not done"}))
		ev.Final = true
		return q.Write(ctx, ev)
	}
	a.mu.Lock()
	round := a.rounds[id]
	a.mu.Unlock()
	return e.ask(ctx, rc, q, orig, round+1)
}

func (e *executor) ask(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, text string, round int) error {
	what := fmt.Sprintf("Approve: %s?", text)
	if e.a.opts.Approvals > 1 {
		what = fmt.Sprintf("Approve step %d of %d: %s?", round, e.a.opts.Approvals, text)
	}
	parts := []a2a.Part{a2a.TextPart{Text: what + " Answer approved or rejected."}}
	if e.a.opts.ApprovalData {
		parts = append(parts, a2a.DataPart{Data: map[string]any{"description": what, "uuid": fmt.Sprintf("approval-%d", round)}})
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateInputRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, parts...))
	ev.Final = true
	return q.Write(ctx, ev)
}

func (e *executor) complete(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, text string) error {
	e.a.mu.Lock()
	e.a.done[string(rc.TaskID)]++
	e.a.mu.Unlock()
	if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.TextPart{Text: "done: " + text})); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}
