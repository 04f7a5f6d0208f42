package rest

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// deleteConversation deletes a conversation (its owner or an admin):
// 200 {conversation (the tombstone), cancelled_run, rejected_approvals,
// purged}; ?purge=true, admins only, removes its events and stored data.
func (a *api) deleteConversation(w http.ResponseWriter, r *http.Request) {
	purge := false
	if v := r.URL.Query().Get("purge"); v != "" {
		var err error
		if purge, err = strconv.ParseBool(v); err != nil {
			core.WriteError(w, mesh.ErrBadRequest.With(fmt.Sprintf("purge %s: true or false", mesh.Clip(v))))
			return
		}
	}
	res, err := a.core.Delete(r.Context(), r.PathValue("id"), purge, core.CallerOf(r))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, res)
}

// query reads a listing's query: limit, cursor, status (one of statuses)
// and owner.
func query(r *http.Request, statuses ...string) (core.Query, error) {
	v := r.URL.Query()
	q, err := core.ParseQuery(v.Get)
	if err != nil {
		return q, err
	}
	if q.Status != "" && !slices.Contains(statuses, q.Status) {
		return q, mesh.ErrBadRequest.With(fmt.Sprintf("status %s is not one of %v", mesh.Clip(q.Status), statuses))
	}
	if v.Has("owner") {
		q.Owner, q.OwnerSet = v.Get("owner"), true
	}
	return q, nil
}

// conversationStatuses are the statuses a listing filters on.
var conversationStatuses = []string{
	string(mesh.StatusActive), string(mesh.StatusQueued), string(mesh.StatusRunning), string(mesh.StatusWaitingApproval),
	string(mesh.StatusCompleted), string(mesh.StatusDeleted), string(mesh.StatusExpired),
}

// listConversations answers a page of conversations, newest first (by
// creation): {conversations, next_cursor, summary: counts by status}.
func (a *api) listConversations(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, conversationStatuses...)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	page, err := a.core.ListConversations(r.Context(), core.CallerOf(r), q)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	summary := map[string]int{"total": 0}
	for _, s := range conversationStatuses {
		summary[s] = page.Counts[s]
		summary["total"] += page.Counts[s]
	}
	body := map[string]any{"conversations": page.Conversations, "summary": summary}
	if page.NextCursor != "" {
		body["next_cursor"] = page.NextCursor
	}
	core.WriteJSON(w, http.StatusOK, body)
}

// listApprovals answers a page of approvals, newest first: {approvals,
// next_cursor}.
func (a *api) listApprovals(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, string(mesh.ApprovalPending), string(mesh.ApprovalApproved), string(mesh.ApprovalRejected))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	page, err := a.core.ListApprovals(r.Context(), core.CallerOf(r), q)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	body := map[string]any{"approvals": page.Approvals}
	if page.NextCursor != "" {
		body["next_cursor"] = page.NextCursor
	}
	core.WriteJSON(w, http.StatusOK, body)
}
