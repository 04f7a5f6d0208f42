package rest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
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
	if watch := r.URL.Query().Get("watch"); watch != "" {
		on, err := strconv.ParseBool(watch)
		if err != nil {
			core.WriteError(w, mesh.ErrBadRequest.With("watch: want true or false"))
			return
		}
		if on {
			a.watchConversations(w, r, q)
			return
		}
	}
	page, err := a.core.ListConversations(r.Context(), core.CallerOf(r), q)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, conversationsBody(page))
}

// watchConversations serves GET /conversations?watch=true: the page as a
// snapshot stream, at once and again at every change to a conversation
// the caller lists, so that a list (the web page's) follows approvals
// decided and turns run elsewhere.
func (a *api) watchConversations(w http.ResponseWriter, r *http.Request, q core.Query) {
	caller := core.CallerOf(r)
	// A refused filter is an error answer, before the stream opens.
	if _, err := a.core.ConversationsChanged(r.Context(), caller, q); err != nil {
		core.WriteError(w, err)
		return
	}
	a.core.ServeSnapshots(w, r, "conversations", func(ctx context.Context, out *sse.Writer) error {
		for {
			changed, err := a.core.ConversationsChanged(ctx, caller, q)
			if err != nil {
				return err
			}
			page, err := a.core.ListConversations(ctx, caller, q)
			if err != nil {
				return err
			}
			if err := core.SendSnapshot(out, "conversations", conversationsBody(page)); err != nil {
				return err
			}
			if err := core.WaitFor(ctx, out, changed); err != nil {
				return err
			}
			// A turn writes its conversation several times in a row: one
			// snapshot says them all.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(watchCoalesce):
			}
		}
	})
}

// watchCoalesce is how long a watch waits after a change for those that
// come with it.
const watchCoalesce = 100 * time.Millisecond

// conversationsBody is a page of conversations as GET /conversations
// answers it: {conversations, summary, next_cursor}.
func conversationsBody(page *core.ConversationPage) map[string]any {
	summary := map[string]int{"total": 0}
	for _, s := range conversationStatuses {
		summary[s] = page.Counts[s]
		summary["total"] += page.Counts[s]
	}
	body := map[string]any{"conversations": page.Conversations, "summary": summary}
	if page.NextCursor != "" {
		body["next_cursor"] = page.NextCursor
	}
	return body
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
