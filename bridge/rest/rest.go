// Package rest is the bridge's REST surface:
//
//	GET  /health                      the mesh's health: healthy, degraded or unhealthy
//	GET  /ready                       200 when a turn can run (NATS, buckets, toolhost, approver, agent), else 503
//	GET  /tools                       the tool catalog, with destructiveHint, and the A2A sub-agents
//	POST /conversations               create, optionally with a first message; {"group": name} for a group chat
//	GET  /groups                      the group chats: participants, strategy, limits
//	GET  /groups/{name}/.well-known/agent-card.json  a group's A2A card (also agent.json); POST /groups/{name}/a2a its A2A endpoint (bridge/a2a)
//	GET  /conversations               summaries, newest first, a page (?limit, cursor, status, owner), counts by status
//	GET  /conversations/{id}          one conversation, all messages; a message still queued for an agent in queued_turn
//	DELETE /conversations/{id}        delete: a tombstone, 410 afterwards; ?purge=true (admins) removes its events too
//	POST /conversations/{id}/messages send a message (Idempotency-Key: a retry after a lost answer does not run it twice)
//	POST /conversations/{id}/cancel   stop the running turn, or cancel the queued one
//	POST /conversations/{id}/regenerate  answer the last user message again (actions.go)
//	POST /conversations/{id}/fork     a branch: the history up to a message or event, shared; optionally a first message (fork.go)
//	GET  /conversations/{id}/branches the conversation's family: its root and the branches the caller may read
//	POST /conversations/{id}/messages/{messageId}/feedback  like or dislike a message
//	POST /approvals/{uuid}            decide: {"approved":true}, {"action":"approve"}, {"answer":"yes"}
//	GET  /approvals                   approvals, newest first, a page (?limit, cursor, status=pending|approved|rejected, owner)
//	GET  /approvals/{uuid}            one approval
//
// The POSTs that start a turn answer when the turn finishes or pauses for an
// approval, or after the wait limit with 202 {conversation, conversation_id,
// run_id, status, events_url}: status is queued while no agent has taken
// the turn up, running after; events_url follows the run's AG-UI events.
// From the moment the bridge accepts a message until an agent takes it up,
// the conversation is queued (status "queued", queued_turn {id, message,
// at}) and refuses other messages with 409 turn_in_progress. Errors are
// JSON {"error": text, "code": kind}.
package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// Config configures the REST routes.
type Config struct {
	Core *core.Core
	// MaxBodyBytes bounds request bodies. Zero means 1 MiB.
	MaxBodyBytes int64
	// WaitTimeout is how long a POST waits for its turn. Zero means 30s.
	WaitTimeout time.Duration
	// Version is reported by /health.
	Version string
	// SubAgents are the A2A agents the agents delegate to, listed by /tools
	// beside the MCP tools.
	SubAgents []config.A2AAgent
	Logger    zerolog.Logger
}

type api struct {
	cfg     Config
	core    *core.Core
	started time.Time
}

// Register mounts the routes on mux.
func Register(mux core.Mux, cfg Config) {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = config.DefaultMaxBodyBytes
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = config.DefaultWaitTimeout
	}
	a := &api{cfg: cfg, core: cfg.Core, started: time.Now()}
	mux.HandleFunc("GET /health", a.health)
	mux.HandleFunc("GET /ready", a.ready)
	mux.HandleFunc("GET /tools", a.tools)
	mux.HandleFunc("GET /groups", a.groups)
	mux.HandleFunc("GET /agents", a.agents)
	mux.HandleFunc("GET /agents/{name}", a.agent)
	mux.HandleFunc("POST /conversations", a.createConversation)
	mux.HandleFunc("GET /conversations", a.listConversations)
	mux.HandleFunc("GET /conversations/{id}", a.getConversation)
	mux.HandleFunc("POST /conversations/{id}/messages", a.sendMessage)
	mux.HandleFunc("POST /conversations/{id}/cancel", a.cancel)
	mux.HandleFunc("POST /conversations/{id}/fork", a.fork)
	mux.HandleFunc("GET /conversations/{id}/branches", a.branches)
	mux.HandleFunc("DELETE /conversations/{id}", a.deleteConversation)
	a.registerActions(mux)
	mux.HandleFunc("GET /conversations/{id}/files/{file}", a.getFile)
	mux.HandleFunc("POST /approvals/{uuid}", a.decide)
	mux.HandleFunc("GET /approvals", a.listApprovals)
	mux.HandleFunc("GET /approvals/{uuid}", a.getApproval)
}

func (a *api) health(w http.ResponseWriter, r *http.Request) {
	core.WriteJSON(w, http.StatusOK, a.core.Health(r.Context(), a.cfg.Version, time.Since(a.started)))
}

func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	ok, checks := a.core.Readiness(r.Context())
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	core.WriteJSON(w, status, map[string]any{"ready": ok, "checks": checks})
}

func (a *api) tools(w http.ResponseWriter, r *http.Request) {
	ts, err := a.core.Catalog.List(r.Context())
	if err != nil {
		core.WriteError(w, err)
		return
	}
	if ts == nil {
		ts = []mesh.ToolEntry{}
	}
	type subAgent struct {
		Name        string `json:"name"`
		URL         string `json:"url"`
		Description string `json:"description,omitempty"`
		Destructive bool   `json:"destructive"`
	}
	subs := []subAgent{}
	for _, a := range a.cfg.SubAgents {
		subs = append(subs, subAgent{Name: a.Name, URL: a.URL, Description: a.Description, Destructive: a.IsDestructive()})
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"tools": ts, "sub_agents": subs})
}

type messageBody struct {
	Message *string `json:"message"`
	// Files are images and documents sent with the message (files.go).
	Files []fileBody `json:"files,omitempty"`
	// Metadata is the client's, stored with the user message as given
	// (at most core.MaxMetadataBytes as JSON).
	Metadata map[string]any `json:"metadata,omitempty"`
	// Group makes the new conversation a chat of that group.
	Group string `json:"group"`
	// Agent makes it a conversation with that agent (GET /agents lists
	// them); empty means the default agent.
	Agent string `json:"agent"`
}

// groups lists the group chats.
func (a *api) groups(w http.ResponseWriter, _ *http.Request) {
	type participant struct {
		Agent       string   `json:"agent"`
		Description string   `json:"description,omitempty"`
		Priority    int      `json:"priority,omitempty"`
		Keywords    []string `json:"keywords,omitempty"`
		Patterns    []string `json:"patterns,omitempty"`
	}
	type group struct {
		Name               string              `json:"name"`
		Description        string              `json:"description,omitempty"`
		Strategy           string              `json:"strategy"`
		Participants       []participant       `json:"participants"`
		MaxTurns           int                 `json:"max_turns"`
		MaxConsecutive     int                 `json:"max_consecutive"`
		MinInterval        string              `json:"min_interval,omitempty"`
		TerminationPhrase  string              `json:"termination_phrase"`
		AllowedTransitions map[string][]string `json:"allowed_transitions,omitempty"`
		Default            string              `json:"default,omitempty"`
	}
	out := []group{}
	for _, g := range a.core.Groups() {
		v := group{Name: g.Name, Description: g.Description, Strategy: g.Strategy, MaxTurns: g.MaxTurns, MaxConsecutive: g.MaxConsecutive,
			TerminationPhrase: g.TerminationPhrase, AllowedTransitions: g.AllowedTransitions, Default: g.Default}
		if d := g.MinInterval.Std(); d > 0 {
			v.MinInterval = d.String()
		}
		for _, p := range g.Participants {
			v.Participants = append(v.Participants, participant{Agent: p.Agent, Description: p.Description, Priority: p.Priority, Keywords: p.Keywords, Patterns: p.Patterns})
		}
		out = append(out, v)
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"groups": out})
}

func (a *api) createConversation(w http.ResponseWriter, r *http.Request) {
	var body messageBody
	if err := core.DecodeBody(w, r, a.cfg.MaxBodyBytes, &body, true); err != nil {
		core.WriteError(w, err)
		return
	}
	caller := core.CallerOf(r)
	var conv *mesh.Conversation
	// Bad files and metadata are refused before anything is created.
	err := a.core.CheckUploads(uploads(body.Files))
	if err == nil {
		err = core.CheckMetadata(body.Metadata)
	}
	switch {
	case err != nil:
	case body.Group != "" && body.Agent != "":
		err = mesh.ErrBadRequest.With(`a conversation is with one agent ("agent") or a group chat ("group"), not both`)
	case body.Agent != "":
		conv, err = a.core.CreateFor(r.Context(), mesh.NewID(), body.Agent, caller)
	default:
		conv, err = a.core.CreateChat(r.Context(), mesh.NewID(), body.Group, caller)
	}
	if err != nil {
		core.WriteError(w, err)
		return
	}
	if (body.Message == nil || *body.Message == "") && len(body.Files) == 0 {
		core.WriteJSON(w, http.StatusCreated, map[string]any{"conversation": conv})
		return
	}
	a.sendFirst(w, r, conv.ID, body.Message, body.Files, body.Metadata, http.StatusCreated, nil)
}

// sendFirst sends the first message on a conversation the request has just
// made (created, or forked) and answers with its run.
func (a *api) sendFirst(w http.ResponseWriter, r *http.Request, id string, message *string, uploaded []fileBody, metadata map[string]any, status int, extra map[string]any) {
	caller := core.CallerOf(r)
	files, err := a.core.StoreFiles(r.Context(), id, uploads(uploaded), caller)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	text := ""
	if message != nil {
		text = *message
	}
	run, err := a.core.SendMessage(r.Context(), id, core.Input{Text: text, Files: files, Metadata: metadata}, caller)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	a.answerRun(w, r, run, status, extra)
}

// getConversation answers the conversation with a page of its messages:
// ?messages=N (default mesh.DefaultPageSize, at most core.MaxPageSize, and
// within store.PageBytes) older than ?before=<cursor> (default: the
// newest); messages_before is the cursor of the page before, absent on
// the first page of the conversation.
func (a *api) getConversation(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n := 0
	if s := q.Get("messages"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			core.WriteError(w, mesh.ErrBadRequest.With(fmt.Sprintf("messages=%s: a page holds 1 to %d messages", mesh.Clip(s), core.MaxPageSize)))
			return
		}
		n = v
	}
	doc, err := a.core.ConversationPage(r.Context(), r.PathValue("id"), core.CallerOf(r), n, q.Get("before"))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSONDoc(w, http.StatusOK, map[string]any{"conversation": doc}, doc)
}

func (a *api) sendMessage(w http.ResponseWriter, r *http.Request) {
	var body messageBody
	if err := core.DecodeBody(w, r, a.cfg.MaxBodyBytes, &body, false); err != nil {
		core.WriteError(w, err)
		return
	}
	if body.Message == nil && len(body.Files) == 0 {
		core.WriteError(w, mesh.ErrBadRequest.With(`field "message" is required: {"message": "…"} (or "files")`))
		return
	}
	text := ""
	if body.Message != nil {
		text = *body.Message
	}
	files, err := a.core.StoreFiles(r.Context(), r.PathValue("id"), uploads(body.Files), core.CallerOf(r))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	var run *core.Run
	in := core.Input{Text: text, Files: files, Metadata: body.Metadata}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		run, err = a.core.SendMessageOnce(r.Context(), r.PathValue("id"), key, in, core.CallerOf(r))
	} else {
		run, err = a.core.SendMessage(r.Context(), r.PathValue("id"), in, core.CallerOf(r))
	}
	if err != nil {
		core.WriteError(w, err)
		return
	}
	a.answerRun(w, r, run, http.StatusOK, nil)
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.core.HeadFor(r.Context(), id, core.CallerOf(r)); err != nil {
		core.WriteError(w, err)
		return
	}
	if err := a.core.Cancel(r.Context(), id, ""); err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusAccepted, map[string]any{"conversation_id": id, "cancel_requested": true})
}

func (a *api) decide(w http.ResponseWriter, r *http.Request) {
	body, err := core.ReadBody(w, r, a.cfg.MaxBodyBytes)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	ap, run, err := a.core.Decide(r.Context(), r.PathValue("uuid"), body, core.CallerOf(r))
	if err != nil {
		if errors.Is(err, mesh.ErrApprovalDecided) && ap != nil {
			core.WriteJSON(w, mesh.HTTPStatus(err), map[string]any{"error": err.Error(), "code": mesh.ErrorKind(err), "approval": ap})
			return
		}
		core.WriteError(w, err)
		return
	}
	a.answerRun(w, r, run, http.StatusOK, map[string]any{"approval": ap})
}

func (a *api) getApproval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	if err := core.CheckApprovalID(id); err != nil {
		core.WriteError(w, err)
		return
	}
	ap, err := a.core.Approvals.Get(r.Context(), id)
	if err == nil && !a.core.SeesApproval(r.Context(), core.CallerOf(r), ap, map[string]string{}) {
		err = mesh.ErrApprovalNotFound.With(fmt.Sprintf("approval %s not found", mesh.Clip(id)))
	}
	if err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"approval": ap})
}

// answerRun waits for run and writes the conversation with the run's result,
// or 202 when the wait limit passes first; extra fields go in both answers.
func (a *api) answerRun(w http.ResponseWriter, r *http.Request, run *core.Run, status int, extra map[string]any) {
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.WaitTimeout)
	defer cancel()
	out, err := run.WaitDoc(ctx)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	if r.Context().Err() != nil {
		return // the client left; the turn goes on
	}
	// The conversation as stored: its messages are passed on, not decoded.
	var conv any
	if out.Doc != nil {
		conv = out.Doc
	}
	body := map[string]any{"conversation": conv}
	for k, v := range extra {
		body[k] = v
	}
	if !out.Finished {
		status := mesh.StatusRunning
		if c := out.Conversation; c != nil && c.Queued != nil && c.Queued.ID == run.ID {
			status = mesh.StatusQueued
		}
		body["conversation_id"], body["run_id"], body["status"] = run.Session(), run.ID, status
		if run.Session() != "" {
			body["events_url"] = run.EventsURL()
		}
		core.WriteJSON(w, http.StatusAccepted, body)
		return
	}
	body["result"] = core.ResultOf(out.Conversation, run.ID, out.Event)
	if out.Doc != nil {
		core.WriteJSONDoc(w, status, body, out.Doc)
		return
	}
	core.WriteJSON(w, status, body)
}
