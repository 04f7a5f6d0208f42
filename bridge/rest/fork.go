package rest

import (
	"net/http"

	"github.com/agentmesh/agentmesh/bridge/core"
)

// forkBody is POST /conversations/{id}/fork's: one point, and optionally
// a first message sent on the branch at once (an edited message).
type forkBody struct {
	After    *string        `json:"after"`
	Before   *string        `json:"before"`
	EventSeq *uint64        `json:"event_seq"`
	Message  *string        `json:"message"`
	Files    []fileBody     `json:"files,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// fork makes a branch of the conversation: 201 with the branch as GET
// /conversations/{id} gives it, or, with a message, the answer of that
// message's turn on the branch (200, or 202 while it runs).
func (a *api) fork(w http.ResponseWriter, r *http.Request) {
	var body forkBody
	if err := core.DecodeBody(w, r, a.cfg.MaxBodyBytes, &body, false); err != nil {
		core.WriteError(w, err)
		return
	}
	// Bad files and metadata are refused before anything is made.
	if err := a.core.CheckUploads(uploads(body.Files)); err != nil {
		core.WriteError(w, err)
		return
	}
	if err := core.CheckMetadata(body.Metadata); err != nil {
		core.WriteError(w, err)
		return
	}
	caller := core.CallerOf(r)
	branch, err := a.core.Fork(r.Context(), r.PathValue("id"), core.ForkRequest{After: body.After, Before: body.Before, EventSeq: body.EventSeq}, caller)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	extra := map[string]any{"id": branch.ID, "conversation_id": branch.ID, "forked_from": branch.ForkedFrom}
	if (body.Message == nil || *body.Message == "") && len(body.Files) == 0 {
		doc, err := a.core.ConversationPage(r.Context(), branch.ID, caller, 0, "")
		if err != nil {
			core.WriteError(w, err)
			return
		}
		extra["conversation"] = doc
		core.WriteJSONDoc(w, http.StatusCreated, extra, doc)
		return
	}
	a.sendFirst(w, r, branch.ID, body.Message, body.Files, body.Metadata, http.StatusOK, extra)
}

// branches lists the family of the conversation: its root and every
// branch of it the caller may read.
func (a *api) branches(w http.ResponseWriter, r *http.Request) {
	fam, err := a.core.Branches(r.Context(), r.PathValue("id"), core.CallerOf(r))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	if fam.Branches == nil {
		fam.Branches = []core.Branch{}
	}
	core.WriteJSON(w, http.StatusOK, fam)
}
