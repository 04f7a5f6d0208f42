package core

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
)

// An index is what a listing pages through: the entries of a bucket
// (conversations, approvals) newest first, in memory, fed by a watch of the
// bucket (listing.go). It keeps them in sorted slices, one of every entry,
// one per status and one per owner, so that a page costs a binary search and
// the page's entries whatever the number of entries; a save costs a binary
// search and, when the status changes, two slice moves of that status's
// entries (memmove, a few microseconds at 100,000).

// entry is one item of an index.
type entry struct {
	id      string
	created int64 // creation time, Unix nanoseconds: the order, newest first
	status  string
	owner   string
	rev     uint64    // the bucket revision it was read at
	updated time.Time // the conversation's updated_at, or when it expired
	item    any       // mesh.ConversationSummary or *mesh.Approval
}

// before reports whether a comes before b in a listing: newer first, and
// by id between equals, so that the order is total.
func before(a, b *entry) bool {
	if a.created != b.created {
		return a.created > b.created
	}
	return a.id < b.id
}

// index is an ordered index of entries.
type index struct {
	mu       sync.RWMutex
	byID     map[string]*entry
	all      []*entry
	byStatus map[string][]*entry
	byOwner  map[string][]*entry
	// ownerCounts counts entries by owner and status.
	ownerCounts map[string]map[string]int

	// changed fires at every change, owners[o] at a change to an entry
	// of owner o: what a watch of a listing waits for.
	sigMu   sync.Mutex
	changed *Signal
	owners  map[string]*Signal
}

func newIndex() *index {
	return &index{byID: map[string]*entry{}, byStatus: map[string][]*entry{}, byOwner: map[string][]*entry{}, ownerCounts: map[string]map[string]int{},
		changed: NewSignal(), owners: map[string]*Signal{}}
}

// changes is the channel closed at the next change to an entry of owner
// (all: to any entry).
func (x *index) changes(owner string, all bool) <-chan struct{} {
	if all {
		return x.changed.Wait()
	}
	x.sigMu.Lock()
	defer x.sigMu.Unlock()
	g := x.owners[owner]
	if g == nil {
		g = NewSignal()
		x.owners[owner] = g
	}
	return g.Wait()
}

// fire wakes the watches of owners' entries. An owner's signal is dropped
// once fired: its waiters were woken, and the next watch makes a new one,
// so that owners nobody watches cost nothing.
func (x *index) fire(owners ...string) {
	x.changed.Fire()
	x.sigMu.Lock()
	defer x.sigMu.Unlock()
	for _, o := range owners {
		if g := x.owners[o]; g != nil {
			g.Fire()
			delete(x.owners, o)
		}
	}
}

// insert puts e in list at its place.
func insert(list []*entry, e *entry) []*entry {
	i, _ := slices.BinarySearchFunc(list, e, cmpEntry)
	return slices.Insert(list, i, e)
}

// remove takes e out of list.
func remove(list []*entry, e *entry) []*entry {
	i, found := slices.BinarySearchFunc(list, e, cmpEntry)
	if !found {
		return list
	}
	return slices.Delete(list, i, i+1)
}

// replace puts e where old, of the same id and creation time, stands.
func replace(list []*entry, old, e *entry) {
	if i, found := slices.BinarySearchFunc(list, old, cmpEntry); found {
		list[i] = e
	}
}

func cmpEntry(a, b *entry) int {
	switch {
	case a.id == b.id && a.created == b.created:
		return 0
	case before(a, b):
		return -1
	}
	return 1
}

// put adds or replaces the entry of e.id; an entry read at an older
// revision than the one held is ignored (rev 0: always applied).
func (x *index) put(e *entry) {
	x.mu.Lock()
	old := x.byID[e.id]
	if old != nil && e.rev != 0 && old.rev > e.rev {
		x.mu.Unlock()
		return
	}
	x.putLocked(old, e)
	x.mu.Unlock()
	if old != nil {
		x.fire(old.owner, e.owner)
	} else {
		x.fire(e.owner)
	}
}

func (x *index) putLocked(old, e *entry) {
	x.byID[e.id] = e
	if old == nil {
		x.add(e)
		return
	}
	if old.created != e.created || old.owner != e.owner {
		x.drop(old)
		x.add(e)
		return
	}
	replace(x.all, old, e)
	replace(x.byOwner[e.owner], old, e)
	x.ownerCounts[old.owner][old.status]--
	x.ownerCounts[e.owner][e.status]++
	if old.status == e.status {
		replace(x.byStatus[e.status], old, e)
		return
	}
	x.byStatus[old.status] = remove(x.byStatus[old.status], old)
	x.byStatus[e.status] = insert(x.byStatus[e.status], e)
}

func (x *index) add(e *entry) {
	x.all = insert(x.all, e)
	x.byStatus[e.status] = insert(x.byStatus[e.status], e)
	x.byOwner[e.owner] = insert(x.byOwner[e.owner], e)
	if x.ownerCounts[e.owner] == nil {
		x.ownerCounts[e.owner] = map[string]int{}
	}
	x.ownerCounts[e.owner][e.status]++
}

func (x *index) drop(e *entry) {
	x.all = remove(x.all, e)
	x.byStatus[e.status] = remove(x.byStatus[e.status], e)
	x.byOwner[e.owner] = remove(x.byOwner[e.owner], e)
	x.ownerCounts[e.owner][e.status]--
	if len(x.byOwner[e.owner]) == 0 {
		delete(x.byOwner, e.owner)
		delete(x.ownerCounts, e.owner)
	}
}

// delete removes the entry of id.
func (x *index) delete(id string) {
	x.mu.Lock()
	old := x.byID[id]
	if old != nil {
		delete(x.byID, id)
		x.drop(old)
	}
	x.mu.Unlock()
	if old != nil {
		x.fire(old.owner)
	}
}

// get is the entry of id, or nil.
func (x *index) get(id string) *entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byID[id]
}

// withStatus are the entries of a status, newest first (a copy).
func (x *index) withStatus(status string) []*entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.byStatus[status])
}

// counts are the numbers of entries by status: every entry's, or one
// owner's (everyOwner false).
func (x *index) counts(owner string, everyOwner bool) map[string]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[string]int{}
	if everyOwner {
		for s, l := range x.byStatus {
			if len(l) > 0 {
				out[s] = len(l)
			}
		}
		return out
	}
	for s, n := range x.ownerCounts[owner] {
		if n > 0 {
			out[s] = n
		}
	}
	return out
}

// Query asks an index for a page.
type Query struct {
	// Limit is the page size: 1 to [MaxPage]; zero means [DefaultPage].
	Limit int
	// Cursor is a page's next_cursor: the page after it. Empty: the first.
	Cursor string
	// Status keeps the entries of that status; empty, all.
	Status string
	// Owner keeps one owner's entries, when OwnerSet ("" is the owner of
	// conversations made with authentication off).
	Owner    string
	OwnerSet bool
}

// Page sizes of a listing.
const (
	DefaultPage = 50
	MaxPage     = 500
)

// ErrBadCursor refuses a cursor no page gave.
var ErrBadCursor = mesh.ErrBadRequest.With("cursor: not a next_cursor of this listing")

// page returns up to q.Limit entries after q.Cursor that pass the filters,
// and the cursor of the page after them ("" when there is none).
func (x *index) page(q Query) ([]*entry, string, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultPage
	}
	q.Limit = min(q.Limit, MaxPage)
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	list := x.all
	switch {
	case q.OwnerSet:
		list = x.byOwner[q.Owner]
	case q.Status != "":
		list = x.byStatus[q.Status]
	}
	i := 0
	if after != nil {
		// The first entry that comes after the cursor's.
		i, _ = slices.BinarySearchFunc(list, after, cmpEntry)
		if i < len(list) && cmpEntry(list[i], after) == 0 {
			i++
		}
	}
	out := make([]*entry, 0, min(q.Limit, len(list)-i))
	for ; i < len(list); i++ {
		e := list[i]
		if q.Status != "" && e.status != q.Status {
			continue
		}
		if len(out) == q.Limit {
			last := out[len(out)-1]
			return out, encodeCursor(last), nil
		}
		out = append(out, e)
	}
	return out, "", nil
}

// A cursor is the place of the last entry of a page: its creation time
// and id, base64url: opaque to clients, and valid on any bridge replica
// (it names no position in one process's memory).
func encodeCursor(e *entry) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(e.created, 10) + "." + e.id))
}

func decodeCursor(s string) (*entry, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBadCursor
	}
	at, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || mesh.CheckID(id) != nil {
		return nil, ErrBadCursor
	}
	return &entry{id: id, created: n}, nil
}

// ParseQuery reads limit, cursor and status of a listing's URL query;
// the owner filter is the caller's to decide (listing.go).
func ParseQuery(get func(string) string) (Query, error) {
	q := Query{Cursor: get("cursor"), Status: get("status")}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPage {
			return q, mesh.ErrBadRequest.With(fmt.Sprintf("limit %s: a number from 1 to %d", mesh.Clip(v), MaxPage))
		}
		q.Limit = n
	}
	return q, nil
}
