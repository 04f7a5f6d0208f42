package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// walk pages through x with q until the end and returns the ids in the
// order the pages gave them.
func walk(t *testing.T, x *index, q Query) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("the walk does not end")
		}
		page, next, err := x.page(q)
		if err != nil {
			t.Fatal(err)
		}
		limit := q.Limit
		if limit == 0 {
			limit = DefaultPage
		}
		if len(page) > limit {
			t.Fatalf("a page of %d, limit %d", len(page), q.Limit)
		}
		for _, e := range page {
			ids = append(ids, e.id)
		}
		if next == "" {
			return ids
		}
		if len(page) == 0 {
			t.Fatal("an empty page with a next cursor")
		}
		q.Cursor = next
	}
}

func TestIndexWalksEveryEntryOnceNewestFirst(t *testing.T) {
	x := newIndex()
	rng := rand.New(rand.NewPCG(1, 2))
	owners, statuses := []string{"", "alice", "bob"}, []string{"active", "running", "deleted"}
	var all []*entry
	for i := range 1000 {
		e := &entry{id: fmt.Sprintf("c%04d", i), created: rng.Int64N(300), owner: owners[rng.IntN(3)], status: statuses[rng.IntN(3)], rev: 1}
		all = append(all, e)
		x.put(e)
	}
	// Saves change statuses; an older revision changes nothing.
	for i := range 300 {
		e := *all[rng.IntN(len(all))]
		e.status, e.rev = statuses[i%3], uint64(i+2)
		x.put(&e)
		all[slices.IndexFunc(all, func(a *entry) bool { return a.id == e.id })] = &e
		stale := e
		stale.status, stale.rev = "stale", 1
		x.put(&stale)
	}
	slices.SortFunc(all, cmpEntry)
	for _, q := range []Query{
		{Limit: 7}, {Limit: 1}, {Limit: 500}, {},
		{Limit: 13, Status: "running"}, {Limit: 13, Owner: "alice", OwnerSet: true},
		{Limit: 5, Owner: "", OwnerSet: true, Status: "deleted"}, {Limit: 3, Status: "none"},
	} {
		var want []string
		for _, e := range all {
			if (q.Status == "" || e.status == q.Status) && (!q.OwnerSet || e.owner == q.Owner) {
				want = append(want, e.id)
			}
		}
		if got := walk(t, x, q); !slices.Equal(got, want) {
			t.Errorf("%+v: %d ids, want %d (first %v, want %v)", q, len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
		}
	}
	counts := x.counts("", true)
	if counts["stale"] != 0 || counts["active"]+counts["running"]+counts["deleted"] != 1000 {
		t.Errorf("counts %v", counts)
	}
	alice := 0
	for _, n := range x.counts("alice", false) {
		alice += n
	}
	if want := len(walk(t, x, Query{Owner: "alice", OwnerSet: true})); alice != want {
		t.Errorf("alice's counts add up to %d, want %d", alice, want)
	}
	// A walk goes on past entries created and changed meanwhile: each
	// entry older than the cursor is seen once.
	page, next, _ := x.page(Query{Limit: 10})
	x.put(&entry{id: "new", created: 1000, status: "active", rev: 1})
	x.delete(page[0].id)
	rest := walk(t, x, Query{Limit: 10, Cursor: next})
	if slices.Contains(rest, "new") || len(rest) != 990 {
		t.Errorf("after the first page: %d entries (new among them: %v)", len(rest), slices.Contains(rest, "new"))
	}
	for _, bad := range []string{"x", "bm90IGEgY3Vyc29y", encodeCursor(&entry{id: "a b"})} {
		if _, _, err := x.page(Query{Cursor: bad}); !errors.Is(err, mesh.ErrBadRequest) {
			t.Errorf("cursor %q: %v, want bad request", bad, err)
		}
	}
}

func authCore(t *testing.T, m *meshtest.Mesh) *Core {
	t.Helper()
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "a", Auth: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func as(name string, roles ...string) Caller {
	return Caller{Principal: &auth.Principal{Name: name, Roles: roles}}
}

// Two bridges on one mesh list the same conversations and approvals, each
// caller its own; a deletion shows as deleted on both, a purge removes it.
func TestListingAcrossReplicas(t *testing.T) {
	m := meshtest.New(t)
	b1, b2 := authCore(t, m), authCore(t, m)
	alice, bob, admin := as("alice", config.RoleUser), as("bob", config.RoleUser), as("root", config.RoleAdmin)
	approver := as("judge", config.RoleApprover)
	ctx := t.Context()
	var aliceIDs []string
	for i := range 30 {
		caller, core := alice, b1
		if i%3 == 0 {
			caller, core = bob, b2
		}
		conv, err := core.NewConversation(ctx, caller)
		if err != nil {
			t.Fatal(err)
		}
		if caller.Principal.Name == "alice" {
			aliceIDs = append(aliceIDs, conv.ID)
		}
		time.Sleep(time.Millisecond) // distinct creation times
	}
	slices.Reverse(aliceIDs) // newest first
	// Approvals of alice's first conversation, written as the approver does.
	for range 3 {
		ap := mesh.Approval{UUID: mesh.NewID(), ConversationID: aliceIDs[0], Status: mesh.ApprovalPending, CreatedAt: time.Now().UTC()}
		data, _ := json.Marshal(ap)
		if _, err := m.Approvals.Put(ctx, ap.UUID, data); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(c *Core, caller Caller, q Query) []string {
		var out []string
		for {
			p, err := c.ListConversations(ctx, caller, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range p.Conversations {
				out = append(out, s.ID)
			}
			if p.NextCursor == "" {
				return out
			}
			q.Cursor = p.NextCursor
		}
	}
	for _, c := range []*Core{b1, b2} {
		meshtest.Eventually(t, 5*time.Second, func() bool {
			return slices.Equal(ids(c, alice, Query{Limit: 4}), aliceIDs) && len(ids(c, admin, Query{Limit: 7})) == 30
		}, "both bridges list alice's 20 conversations and the admin all 30")
		if got := ids(c, admin, Query{Owner: "bob", OwnerSet: true}); len(got) != 10 {
			t.Errorf("admin's owner filter: %d of bob's, want 10", len(got))
		}
		if _, err := c.ListConversations(ctx, alice, Query{Owner: "bob", OwnerSet: true}); mesh.HTTPStatus(err) != http.StatusForbidden {
			t.Errorf("alice filtering bob's: %v, want 403", err)
		}
		meshtest.Eventually(t, 5*time.Second, func() bool {
			a, err1 := c.ListApprovals(ctx, alice, Query{})
			b, err2 := c.ListApprovals(ctx, bob, Query{})
			j, err3 := c.ListApprovals(ctx, approver, Query{Limit: 2, Status: string(mesh.ApprovalPending)})
			return err1 == nil && err2 == nil && err3 == nil && len(a.Approvals) == 3 && len(b.Approvals) == 0 && len(j.Approvals) == 2 && j.NextCursor != ""
		}, "alice sees her 3 approvals, bob none, the approver all of them by pages")
	}
	// Bob cannot delete alice's; alice can, and both bridges list it deleted.
	if _, err := b1.Delete(ctx, aliceIDs[1], false, bob); !errors.Is(err, mesh.ErrSessionNotFound) || mesh.IsGone(err) {
		t.Fatalf("bob deleting alice's: %v, want not found", err)
	}
	if _, err := b1.Delete(ctx, aliceIDs[1], true, alice); mesh.HTTPStatus(err) != http.StatusForbidden {
		t.Fatalf("alice purging: %v, want 403", err)
	}
	res, err := b1.Delete(ctx, aliceIDs[1], false, alice)
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if res.Conversation.Status != mesh.StatusDeleted {
		t.Fatalf("delete: status %s, want %s", res.Conversation.Status, mesh.StatusDeleted)
	}
	if res.Conversation.DeletedBy != "alice" {
		t.Fatalf("delete: deleted by %q, want alice", res.Conversation.DeletedBy)
	}
	if res.Purged {
		t.Fatal("delete without purge: purged, want a tombstone")
	}
	if _, err := b2.HeadFor(ctx, aliceIDs[1], bob); !errors.Is(err, mesh.ErrSessionNotFound) || mesh.IsGone(err) {
		t.Errorf("bob reading alice's deleted conversation: %v, want not found (not gone)", err)
	}
	if _, err := b2.HeadFor(ctx, aliceIDs[1], alice); !errors.Is(err, mesh.ErrSessionDeleted) {
		t.Errorf("alice reading her deleted conversation: %v, want 410 deleted", err)
	}
	for _, c := range []*Core{b1, b2} {
		meshtest.Eventually(t, 5*time.Second, func() bool {
			p, err := c.ListConversations(ctx, alice, Query{Status: string(mesh.StatusDeleted)})
			return err == nil && len(p.Conversations) == 1 && p.Conversations[0].ID == aliceIDs[1] && p.Counts["deleted"] == 1 && c.SessionCounts()["deleted"] == 1
		}, "the deletion is listed")
	}
	if _, err := b2.Delete(ctx, aliceIDs[1], true, admin); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Core{b1, b2} {
		meshtest.Eventually(t, 5*time.Second, func() bool {
			return len(ids(c, alice, Query{})) == 19 && c.SessionCounts()["deleted"] == 0
		}, "the purge is listed")
	}
	if _, err := b1.HeadFor(ctx, aliceIDs[1], alice); !errors.Is(err, mesh.ErrSessionNotFound) || mesh.IsGone(err) {
		t.Errorf("a purged conversation: %v, want not found", err)
	}
}
