package rest

import (
	"net/http"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// This file holds the user actions on answers:
//
//	POST /conversations/{id}/regenerate                        answer the last user message again; the old answer is kept, superseded
//	POST /conversations/{id}/messages/{messageId}/feedback     {"rating": "like"|"dislike", "comment"?}

// registerActions mounts the routes of the user actions.
func (a *api) registerActions(mux core.Mux) {
	mux.HandleFunc("POST /conversations/{id}/regenerate", a.regenerate)
	mux.HandleFunc("POST /conversations/{id}/messages/{messageId}/feedback", a.feedback)
}

// regenerate starts a run that answers the conversation's last user
// message again, and answers as POST …/messages does: the run's result, or
// 202 after the wait limit. The body is optional: {"run_id"} names the run.
func (a *api) regenerate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RunID string `json:"run_id"`
	}
	if err := core.DecodeBody(w, r, a.cfg.MaxBodyBytes, &body, true); err != nil {
		core.WriteError(w, err)
		return
	}
	run, err := a.core.Regenerate(r.Context(), r.PathValue("id"), body.RunID, core.CallerOf(r))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	a.answerRun(w, r, run, http.StatusOK, nil)
}

// feedback records the caller's rating of a message: 200 {"feedback"}.
func (a *api) feedback(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Rating  *string `json:"rating"`
		Comment string  `json:"comment"`
	}
	if err := core.DecodeBody(w, r, a.cfg.MaxBodyBytes, &body, false); err != nil {
		core.WriteError(w, err)
		return
	}
	if body.Rating == nil {
		core.WriteError(w, mesh.ErrBadRequest.With(`field "rating" is required: {"rating": "like"|"dislike", "comment": "…"}`))
		return
	}
	in := core.FeedbackInput{Rating: *body.Rating, Comment: body.Comment}
	f, err := a.core.Feedback(r.Context(), r.PathValue("id"), r.PathValue("messageId"), in, core.CallerOf(r))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"conversation_id": r.PathValue("id"), "feedback": f})
}
