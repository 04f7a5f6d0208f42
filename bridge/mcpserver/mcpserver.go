// Package mcpserver serves the mesh to MCP clients at /mcp (Streamable
// HTTP, the official Go SDK's server): every agent and group of the mesh is
// a tool that takes a message and, to go on with one, a conversation id, and
// answers with the turn's reply and, as structured content, the
// conversation, the run, its tool calls and any approval it waits for.
//
// A conversation started over MCP is an ordinary conversation of the
// caller's: it shows in REST, the web page and `nats sub`, and the mesh's
// approvals hold for it as for any other (a destructive call waits for a
// person with the right to decide). While a turn runs, a client that sent a
// progress token gets its events as progress notifications; a client that
// cancels the request (notifications/cancelled) cancels the turn.
//
// An MCP session belongs to the principal that opened it: a request of
// another principal naming it is answered 404, as an unknown session is.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// Path is where the MCP server is served.
const Path = "/mcp"

// MetadataPath is where the OAuth Protected Resource Metadata of [Path] is
// served (RFC 9728: the well-known path with the resource's path after
// it), so that a client refused with 401 learns how to authenticate.
const MetadataPath = "/.well-known/oauth-protected-resource" + Path

// Prefixes of the tools: an agent's and a group's.
const (
	AgentToolPrefix = "agent_"
	GroupToolPrefix = "group_"
)

// sessionTimeout is how long an idle MCP session is kept.
const sessionTimeout = 30 * time.Minute

// eventStoreBytes bounds the events kept for resumption, all sessions
// together: the oldest go first.
const eventStoreBytes = 16 << 20

// Config configures the MCP server.
type Config struct {
	Core    *core.Core
	Version string
	Logger  zerolog.Logger
	// PublicURL is http.public_url: the resource's URL when set, else the
	// request's host.
	PublicURL string
	// AuthorizationServers issue the tokens the bridge takes (a JWT
	// issuer); none for static tokens.
	AuthorizationServers []string
	// Tools chooses the hosted tools offered (http.mcp_tools): nil means
	// all, an empty list none; an entry is "<server>" or "<server>.<tool>".
	Tools *[]string
	// ApprovalWait bounds how long a hosted tool's call waits for a
	// person's decision before it answers with the approval, to be waited
	// on with approval_wait (http.wait_timeout). Zero means 30s.
	ApprovalWait time.Duration
}

// Register mounts the MCP server on mux: POST (messages), GET (the
// server's stream) and DELETE (end a session) of [Path].
func Register(mux core.Mux, cfg Config) {
	if cfg.ApprovalWait <= 0 {
		cfg.ApprovalWait = 30 * time.Second
	}
	s := &server{cfg: cfg, owners: map[string]*owner{}}
	// The events of each session's streams are kept (bounded) so that a
	// client that lost its stream resumes it with Last-Event-ID.
	events := mcp.NewMemoryEventStore(nil)
	events.SetMaxBytes(eventStoreBytes)
	// The bridge checks the Host header itself (http.hosts, 421): the SDK's
	// own check, for servers on loopback, would refuse a proxy's host.
	s.sdk = mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		SessionTimeout: sessionTimeout, EventStore: events, DisableLocalhostProtection: true,
	})
	for _, m := range []string{"POST", "GET", "DELETE"} {
		mux.HandleFunc(m+" "+Path, s.serveHTTP)
	}
	mux.HandleFunc("GET "+MetadataPath, s.metadata)
}

// metadata serves the OAuth Protected Resource Metadata of /mcp.
func (s *server) metadata(w http.ResponseWriter, r *http.Request) {
	doc := map[string]any{
		"resource":                 BaseURL(r, s.cfg.PublicURL) + Path,
		"resource_name":            "Agent Mesh",
		"bearer_methods_supported": []string{"header"},
	}
	if len(s.cfg.AuthorizationServers) > 0 {
		doc["authorization_servers"] = s.cfg.AuthorizationServers
	}
	core.WriteJSON(w, http.StatusOK, doc)
}

// BaseURL is the bridge's URL as a client reached it: http.public_url when
// set, else the request's scheme and host.
func BaseURL(r *http.Request, publicURL string) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

type server struct {
	cfg Config
	sdk *mcp.StreamableHTTPHandler

	mu     sync.Mutex
	owners map[string]*owner // MCP session id → who opened it
}

type owner struct {
	who  string
	seen time.Time
}

// principal names the caller for the ownership of sessions: "" without
// authentication.
func principal(c core.Caller) string {
	if c.Principal == nil {
		return ""
	}
	return c.Principal.Name
}

func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	who := principal(core.CallerOf(r))
	sid := r.Header.Get("Mcp-Session-Id")
	if sid != "" {
		s.mu.Lock()
		o := s.owners[sid]
		if o != nil && o.who == who {
			o.seen = time.Now()
		}
		s.mu.Unlock()
		if o != nil && o.who != who {
			// Another principal's session is as unknown as no session.
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	if sid != "" && r.Method == http.MethodDelete {
		defer func() {
			s.mu.Lock()
			delete(s.owners, sid)
			s.mu.Unlock()
		}()
	}
	s.sdk.ServeHTTP(&sessionWriter{ResponseWriter: w, s: s, asked: sid, who: who}, r)
}

// sessionWriter records who opened a session as the answer that names it
// goes out, before the client can use it.
type sessionWriter struct {
	http.ResponseWriter
	s     *server
	asked string
	who   string
	done  bool
}

func (w *sessionWriter) WriteHeader(code int) {
	if !w.done {
		w.done = true
		if sid := w.Header().Get("Mcp-Session-Id"); sid != "" && sid != w.asked && code < 300 {
			w.s.own(sid, w.who)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *sessionWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// own records the owner of a new session, and forgets the sessions idle
// longer than the SDK keeps them.
func (s *server) own(sid, who string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for id, o := range s.owners {
		if now.Sub(o.seen) > sessionTimeout {
			delete(s.owners, id)
		}
	}
	s.owners[sid] = &owner{who: who, seen: now}
}

// serverFor builds the MCP server of a new session, for the caller that
// opens it: one tool per agent of the directory and per group.
func (s *server) serverFor(r *http.Request) *mcp.Server {
	caller := core.CallerOf(r)
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentmesh", Title: "Agent Mesh", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: "Each tool is an agent or a group chat of the mesh. Send it a message; to go on with a conversation, " +
			"pass the conversation_id its last answer gave. A destructive action waits for a person to approve it.",
	})
	agents, err := s.cfg.Core.Agents(r.Context())
	if err != nil {
		s.cfg.Logger.Warn().Err(err).Msg("mcp: list agents")
	}
	for _, a := range agents {
		desc := a.Description
		if desc == "" {
			desc = "The agent " + a.Name + " of the mesh."
		}
		if len(a.Tools) > 0 {
			desc += " Its tools: " + strings.Join(a.Tools, ", ") + "."
		}
		mcp.AddTool(srv, &mcp.Tool{Name: AgentToolPrefix + a.Name, Title: a.Name, Description: desc,
			Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}}, s.ask(caller, a.Name, ""))
	}
	groups := s.cfg.Core.Groups()
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	for _, g := range groups {
		desc := g.Description
		if desc == "" {
			desc = "The group chat " + g.Name + " of the mesh: several agents answer in turn."
		}
		mcp.AddTool(srv, &mcp.Tool{Name: GroupToolPrefix + g.Name, Title: g.Name, Description: desc,
			Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}}, s.ask(caller, "", g.Name))
	}
	entries, err := s.cfg.Core.Catalog.List(r.Context())
	if err != nil {
		s.cfg.Logger.Warn().Err(err).Msg("mcp: list the tool catalog")
	}
	s.addGateway(srv, caller, offered(entries, s.cfg.Tools))
	return srv
}

func ptr[T any](v T) *T { return &v }

// AskInput is what an agent's or group's tool takes.
type AskInput struct {
	Message string `json:"message" jsonschema:"the message to the agent or group"`
	// ConversationID goes on with a conversation its earlier answer named.
	ConversationID string `json:"conversation_id,omitempty" jsonschema:"the conversation to go on with (from an earlier answer); empty starts a new one"`
}

// AskOutput is the structured content of the answer.
type AskOutput struct {
	ConversationID string `json:"conversation_id"`
	RunID          string `json:"run_id"`
	// Status is the conversation's: active, waiting_approval, error …
	Status   string `json:"status"`
	Outcome  string `json:"outcome,omitempty"`
	Response string `json:"response"`
	// ToolCalls are the calls the turn made, in order.
	ToolCalls       []ToolCall            `json:"tool_calls"`
	WaitingApproval bool                  `json:"waiting_approval"`
	Approval        *mesh.PendingApproval `json:"approval,omitempty"`
	ErrorCode       string                `json:"error_code,omitempty"`
	Error           string                `json:"error,omitempty"`
}

// ToolCall is one tool call of a turn.
type ToolCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// ask is the handler of an agent's tool (group empty) or a group's.
func (s *server) ask(caller core.Caller, agent, group string) mcp.ToolHandlerFor[AskInput, AskOutput] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in AskInput) (*mcp.CallToolResult, AskOutput, error) {
		c := s.cfg.Core
		conv := in.ConversationID
		if conv == "" {
			var created *mesh.Conversation
			var err error
			if group != "" {
				created, err = c.CreateChat(ctx, mesh.NewID(), group, caller)
			} else {
				created, err = c.CreateFor(ctx, mesh.NewID(), agent, caller)
			}
			if err != nil {
				return failed(err), AskOutput{}, nil
			}
			conv = created.ID
		} else if err := s.sameTarget(ctx, conv, agent, group, caller); err != nil {
			return failed(err), AskOutput{}, nil
		}
		run, out, err := s.runTurn(ctx, req, conv, in.Message, caller)
		switch {
		case run == nil:
			return failed(err), AskOutput{ConversationID: conv}, nil
		case ctx.Err() != nil:
			return nil, AskOutput{}, ctx.Err()
		case err != nil:
			return failed(err), AskOutput{ConversationID: conv, RunID: run.ID}, nil
		}
		return answer(out, conv, run.ID)
	}
}

// runTurn sends text as a turn of conv and waits for it to end, with its
// progress. run is nil when the turn was not taken. A request the client
// cancels (or leaves) cancels the turn, and err is ctx's.
func (s *server) runTurn(ctx context.Context, req *mcp.CallToolRequest, conv, text string, caller core.Caller) (run *core.Run, out *core.Outcome, err error) {
	c := s.cfg.Core
	if run, err = c.Send(ctx, conv, text, caller); err != nil {
		return nil, nil, err
	}
	flushed := s.followProgress(ctx, req, conv, run)
	out, err = run.Wait(ctx)
	flushed()
	if ctx.Err() != nil {
		if cerr := c.Cancel(context.WithoutCancel(ctx), conv, run.ID); cerr != nil {
			s.cfg.Logger.Warn().Err(cerr).Str("session", conv).Msg("mcp: cancel the turn of a cancelled call")
		}
		return run, nil, ctx.Err()
	}
	return run, out, err
}

// sameTarget checks that conv is the caller's and is a conversation of the
// tool's agent or group.
func (s *server) sameTarget(ctx context.Context, conv, agent, group string, caller core.Caller) error {
	h, err := s.cfg.Core.HeadFor(ctx, conv, caller)
	if err != nil {
		return err
	}
	switch {
	case h.Group != nil && h.Group.Name != group:
		return mesh.ErrBadRequest.With(fmt.Sprintf("conversation %s is the group chat %s: call %s%s", conv, h.Group.Name, GroupToolPrefix, h.Group.Name))
	case h.Group == nil && group != "":
		return mesh.ErrBadRequest.With(fmt.Sprintf("conversation %s is with the agent %s: call %s%s", conv, h.Agent, AgentToolPrefix, h.Agent))
	case h.Group == nil && h.Agent != agent:
		return mesh.ErrBadRequest.With(fmt.Sprintf("conversation %s is with the agent %s: call %s%s", conv, h.Agent, AgentToolPrefix, h.Agent))
	}
	return nil
}

// answer is the tool's result for a turn that ended (or waits for an
// approval).
func answer(out *core.Outcome, conv, runID string) (*mcp.CallToolResult, AskOutput, error) {
	res := core.ResultOf(out.Conversation, runID, out.Event)
	o := AskOutput{
		ConversationID: conv, RunID: runID, Status: string(out.Conversation.Status), Outcome: res.Outcome,
		Response: res.Response, ToolCalls: []ToolCall{}, WaitingApproval: res.WaitingApproval, Approval: res.Approval,
		ErrorCode: res.ErrorCode, Error: res.Error,
	}
	for _, m := range out.Conversation.Messages {
		if m.TurnID != runID {
			continue
		}
		for _, tc := range m.ToolCalls {
			o.ToolCalls = append(o.ToolCalls, ToolCall{Name: tc.Name, Arguments: tc.Arguments})
		}
	}
	text := o.Response
	switch {
	case o.WaitingApproval && o.Approval != nil:
		text = fmt.Sprintf("%s\n\nThis action waits for a person to approve it: %s (approval %s). Call again with conversation_id %s once it is decided.",
			strings.TrimSpace(text), o.Approval.Description, o.Approval.UUID, conv)
	case o.Error != "":
		text = "The turn failed (" + o.ErrorCode + "): " + o.Error
	case text == "":
		text = "(no reply)"
	}
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimSpace(text)}}, IsError: o.Error != ""}
	return result, o, nil
}

// failed is a tool error the model (or person) calling can read: the call
// reached the mesh, and the mesh refused or failed it.
func failed(err error) *mcp.CallToolResult {
	body, _ := json.Marshal(map[string]string{"code": mesh.ErrorKind(err), "error": err.Error()})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}
}

// progressFlush bounds how long an answer waits for the progress of its
// run's end to go out first.
const progressFlush = time.Second

// followProgress sends run's events as progress notifications when the
// request carries a progress token, and returns the function to call once
// the run is over: it waits (up to progressFlush) until the run's end went
// out as progress, so that a client gets it before the answer, then stops.
func (s *server) followProgress(ctx context.Context, req *mcp.CallToolRequest, conv string, run *core.Run) (flushed func()) {
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return func() {}
	}
	pctx, stop := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		s.progress(pctx, req, tok, conv, run)
	}()
	return func() {
		select {
		case <-ended:
		case <-time.After(progressFlush):
		}
		stop()
	}
}

// progress sends the run's events as progress notifications until its end
// (sent too) or until ctx ends.
func (s *server) progress(ctx context.Context, req *mcp.CallToolRequest, tok any, conv string, run *core.Run) {
	f, err := s.cfg.Core.Follow(ctx, conv, run.EventsAfter())
	if err != nil {
		return
	}
	defer f.Close()
	n := 0
	for {
		ev, err := f.Next(ctx)
		if err != nil {
			return
		}
		if ev.Run != run.ID {
			continue
		}
		if msg := progressMessage(ev); msg != "" {
			n++
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n), Message: msg}); err != nil {
				return
			}
		}
		if ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventRunError {
			return
		}
	}
}

// progressMessage says what an event means for the person waiting, or ""
// for the events that say nothing new (text deltas, state).
func progressMessage(ev core.StreamEvent) string {
	var e mesh.Event
	switch ev.Type {
	case mesh.EventRunStarted:
		return "an agent took the turn up"
	case mesh.EventStepStarted, mesh.EventToolCallStart, mesh.EventCustom, mesh.EventRunFinished, mesh.EventRunError:
		if json.Unmarshal(ev.Data, &e) != nil {
			return ""
		}
	case mesh.EventTextMessageStart:
		return "answering"
	case mesh.EventToolCallResult:
		return "a tool answered"
	default:
		return ""
	}
	switch ev.Type {
	case mesh.EventStepStarted:
		return "step " + e.StepName
	case mesh.EventToolCallStart:
		return "calling " + e.ToolCallName
	case mesh.EventRunFinished:
		if e.Outcome != nil && e.Outcome.Type == mesh.OutcomeInterrupt {
			return "waiting for a person to approve"
		}
		return "done"
	case mesh.EventRunError:
		return "failed: " + e.Code
	}
	switch e.Name {
	case mesh.CustomRunQueued:
		return "queued"
	case mesh.CustomApprovalRequested:
		return "asked for approval"
	case mesh.CustomRunRetried:
		return "running again"
	}
	return ""
}

// offered is the part of the catalog the configuration lets /mcp offer.
func offered(entries []mesh.ToolEntry, choose *[]string) []mesh.ToolEntry {
	if choose == nil {
		return entries
	}
	var out []mesh.ToolEntry
	for _, e := range entries {
		for _, c := range *choose {
			if c == e.Server || c == GatewayToolName(e) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}
