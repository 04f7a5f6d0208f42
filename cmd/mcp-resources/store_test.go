package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"
)

// testTime is the fixed clock of test stores, deliberately not in UTC.
var testTime = time.Date(2025, 1, 2, 4, 4, 5, 6_000_000, time.FixedZone("CET", 3600))

// wantStamp is testTime as the store writes it.
const wantStamp = "2025-01-02T03:04:05.006Z"

var idPattern = regexp.MustCompile(`^res_[0-9a-f]{12}$`)

// newTestStore opens a store on a fresh file, closed when the test ends.
func newTestStore(t *testing.T) (*store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "resources.db")
	return openTestStore(t, path), path
}

// openTestStore opens a store on path, closed when the test ends.
func openTestStore(t *testing.T, path string) *store {
	t.Helper()
	st, err := openStore(t.Context(), storeConfig{Path: path, Now: func() time.Time { return testTime }})
	if err != nil {
		t.Fatalf("openStore(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// mustAdd adds a resource without a call id.
func mustAdd(t *testing.T, st *store, name string, value int64) resource {
	t.Helper()
	r, _, err := st.add(t.Context(), "", name, value)
	if err != nil {
		t.Fatalf("add(%q, %d): %v", name, value, err)
	}
	return r
}

// names returns the names of rs in order.
func names(rs []resource) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// countRows counts the rows of table in the database at path, read with
// database/sql directly.
func countRows(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestStoreAddList(t *testing.T) {
	st, _ := newTestStore(t)

	got, err := st.list(t.Context(), "")
	if err != nil {
		t.Fatalf("list on empty store: %v", err)
	}
	if got == nil || len(got) != 0 {
		t.Fatalf("list on empty store = %#v, want empty non-nil slice", got)
	}

	b := mustAdd(t, st, "beta", 2)
	a := mustAdd(t, st, "  alpha ", -1)
	if want := (resource{ID: a.ID, Name: "alpha", Value: -1, CreatedAt: wantStamp, UpdatedAt: wantStamp}); a != want {
		t.Errorf("add returned %+v, want %+v", a, want)
	}
	for _, r := range []resource{a, b} {
		if !idPattern.MatchString(r.ID) {
			t.Errorf("id %q does not match %s", r.ID, idPattern)
		}
	}
	if a.ID == b.ID {
		t.Errorf("two adds gave the same id %q", a.ID)
	}

	got, err = st.list(t.Context(), "")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if want := []resource{a, b}; !reflect.DeepEqual(got, want) {
		t.Errorf("list = %+v, want %+v (ordered by name)", got, want)
	}
}

func TestStoreAddEmptyName(t *testing.T) {
	st, path := newTestStore(t)
	for _, name := range []string{"", "   ", "\t\n"} {
		if _, _, err := st.add(t.Context(), "c", name, 1); !errors.Is(err, ErrEmptyName) {
			t.Errorf("add(%q) error = %v, want %v", name, err, ErrEmptyName)
		}
	}
	if n := countRows(t, path, "resources"); n != 0 {
		t.Errorf("resources has %d rows after failed adds, want 0", n)
	}
	if n := countRows(t, path, "calls"); n != 0 {
		t.Errorf("calls has %d rows after failed adds, want 0", n)
	}
}

func TestStoreListPattern(t *testing.T) {
	st, _ := newTestStore(t)
	for _, n := range []string{"web-1", "web-2", "db-1", "web-10"} {
		mustAdd(t, st, n, 1)
	}
	tests := []struct {
		name    string
		pattern string
		want    []string
		wantErr error
	}{
		{name: "all", pattern: "", want: []string{"db-1", "web-1", "web-10", "web-2"}},
		{name: "prefix", pattern: "^web", want: []string{"web-1", "web-10", "web-2"}},
		{name: "unanchored", pattern: "-1", want: []string{"db-1", "web-1", "web-10"}},
		{name: "exact", pattern: "^web-1$", want: []string{"web-1"}},
		{name: "none", pattern: "cache", want: []string{}},
		{name: "bad regexp", pattern: "web-(", wantErr: ErrBadPattern},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.list(t.Context(), tt.pattern)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("list(%q) error = %v, want %v", tt.pattern, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := names(got); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("list(%q) names = %q, want %q", tt.pattern, got, tt.want)
			}
		})
	}
}

func TestStoreRemove(t *testing.T) {
	tests := []struct {
		name    string
		idOf    string // name of the seeded resource whose id is passed
		id      string // id passed when idOf is empty
		pattern string
		want    []string // names removed, in order
		wantErr error
	}{
		{name: "by id", idOf: "alpha", want: []string{"alpha"}},
		{name: "by pattern", pattern: "^alpha", want: []string{"alpha", "alphabet"}},
		{name: "id and matching pattern", idOf: "beta", pattern: "et", want: []string{"beta"}},
		{name: "id and other pattern", idOf: "beta", pattern: "^alpha", want: []string{}},
		{name: "unknown id", id: "res_000000000000", want: []string{}},
		{name: "pattern matching none", pattern: "gamma", want: []string{}},
		{name: "no selector", wantErr: ErrNoSelector},
		{name: "bad pattern", pattern: "*", wantErr: ErrBadPattern},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := newTestStore(t)
			byName := map[string]resource{}
			for _, n := range []string{"beta", "alpha", "alphabet"} {
				byName[n] = mustAdd(t, st, n, 1)
			}
			id := tt.id
			if tt.idOf != "" {
				id = byName[tt.idOf].ID
			}
			got, replayed, err := st.remove(t.Context(), "", id, tt.pattern)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("remove(%q, %q) error = %v, want %v", id, tt.pattern, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			wantIDs := []string{}
			for _, n := range tt.want {
				wantIDs = append(wantIDs, byName[n].ID)
			}
			if want := (removal{RemovedCount: len(wantIDs), RemovedIDs: wantIDs}); !reflect.DeepEqual(got, want) || replayed {
				t.Errorf("remove(%q, %q) = %+v, replayed %v; want %+v, false", id, tt.pattern, got, replayed, want)
			}
			left, err := st.list(t.Context(), "")
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			for _, r := range left {
				for _, gone := range wantIDs {
					if r.ID == gone {
						t.Errorf("%s (%s) still listed after remove", r.ID, r.Name)
					}
				}
			}
			if len(left)+len(wantIDs) != len(byName) {
				t.Errorf("%d left + %d removed, want %d in all", len(left), len(wantIDs), len(byName))
			}
		})
	}
}

func TestStoreAddCallID(t *testing.T) {
	st, path := newTestStore(t)
	first, replayed, err := st.add(t.Context(), "call-1", "web", 7)
	if err != nil || replayed {
		t.Fatalf("first add = %v, replayed %v; want nil, false", err, replayed)
	}
	again, replayed, err := st.add(t.Context(), "call-1", "web", 7)
	if err != nil || !replayed {
		t.Fatalf("repeated add = %v, replayed %v; want nil, true", err, replayed)
	}
	if again != first {
		t.Errorf("repeated add returned %+v, want the first result %+v", again, first)
	}
	if n := countRows(t, path, "resources"); n != 1 {
		t.Errorf("resources has %d rows, want 1", n)
	}

	// Another id, or none, adds again.
	mustAdd(t, st, "web", 7)
	if _, _, err := st.add(t.Context(), "call-2", "web", 7); err != nil {
		t.Fatalf("add with call-2: %v", err)
	}
	if n := countRows(t, path, "resources"); n != 3 {
		t.Errorf("resources has %d rows, want 3", n)
	}
	if n := countRows(t, path, "calls"); n != 2 {
		t.Errorf("calls has %d rows, want 2", n)
	}
}

func TestStoreRemoveCallID(t *testing.T) {
	st, _ := newTestStore(t)
	web := mustAdd(t, st, "web", 1)
	mustAdd(t, st, "db", 2)

	first, replayed, err := st.remove(t.Context(), "call-rm", "", "^web")
	if err != nil || replayed {
		t.Fatalf("first remove = %v, replayed %v; want nil, false", err, replayed)
	}
	if want := (removal{RemovedCount: 1, RemovedIDs: []string{web.ID}}); !reflect.DeepEqual(first, want) {
		t.Errorf("first remove = %+v, want %+v", first, want)
	}

	// A resource added since matches the pattern, but a repeated call must
	// not touch it.
	web2 := mustAdd(t, st, "web", 3)
	again, replayed, err := st.remove(t.Context(), "call-rm", "", "^web")
	if err != nil || !replayed {
		t.Fatalf("repeated remove = %v, replayed %v; want nil, true", err, replayed)
	}
	if !reflect.DeepEqual(again, first) {
		t.Errorf("repeated remove = %+v, want the first result %+v", again, first)
	}
	left, err := st.list(t.Context(), "^web")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(left) != 1 || left[0].ID != web2.ID {
		t.Errorf("after repeated remove, list(^web) = %+v, want only %s", left, web2.ID)
	}
}

func TestStoreCallIDReused(t *testing.T) {
	st, path := newTestStore(t)
	mustAdd(t, st, "keep", 1)
	if _, _, err := st.add(t.Context(), "shared", "web", 1); err != nil {
		t.Fatalf("add: %v", err)
	}
	_, _, err := st.remove(t.Context(), "shared", "", ".")
	if !errors.Is(err, ErrCallIDReused) {
		t.Fatalf("remove with an add's call id: error = %v, want %v", err, ErrCallIDReused)
	}
	if n := countRows(t, path, "resources"); n != 2 {
		t.Errorf("resources has %d rows, want 2 (remove must not run)", n)
	}
}

func TestStoreFailedCallNotRecorded(t *testing.T) {
	st, _ := newTestStore(t)
	if _, _, err := st.remove(t.Context(), "retry", "", ""); !errors.Is(err, ErrNoSelector) {
		t.Fatalf("remove without selector: error = %v, want %v", err, ErrNoSelector)
	}
	if _, _, err := st.add(t.Context(), "retry2", "", 1); !errors.Is(err, ErrEmptyName) {
		t.Fatalf("add without name: error = %v, want %v", err, ErrEmptyName)
	}
	// The failed calls left no record, so the same ids may succeed later.
	if _, replayed, err := st.add(t.Context(), "retry2", "web", 1); err != nil || replayed {
		t.Errorf("add after failure = %v, replayed %v; want nil, false", err, replayed)
	}
}

// TestStoreSharedFile runs two stores on one file, as two toolhost replicas
// do, and sends each call id through both at once.
func TestStoreSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	stores := []*store{openTestStore(t, path), openTestStore(t, path)}

	const calls, tries = 8, 4
	results := make([][]resource, calls)
	var wg sync.WaitGroup
	errs := make(chan error, calls*tries)
	for c := range calls {
		results[c] = make([]resource, tries)
		for i := range tries {
			wg.Go(func() {
				r, _, err := stores[i%2].add(t.Context(), fmt.Sprintf("call-%d", c), fmt.Sprintf("res-%d", c), int64(c))
				if err != nil {
					errs <- fmt.Errorf("call-%d try %d: %w", c, i, err)
				}
				results[c][i] = r
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for c, rs := range results {
		for i, r := range rs {
			if r != rs[0] {
				t.Errorf("call-%d try %d returned %+v, want %+v like try 0", c, i, r, rs[0])
			}
		}
	}
	if n := countRows(t, path, "resources"); n != calls {
		t.Errorf("resources has %d rows, want %d (one per call id)", n, calls)
	}
}

func TestOpenStoreOddPath(t *testing.T) {
	// '?' and '#' must stay part of the file name.
	path := filepath.Join(t.TempDir(), "a?b#c%d.db")
	st := openTestStore(t, path)
	mustAdd(t, st, "x", 1)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
	if n := countRows(t, "file:"+escapePath(path), "resources"); n != 1 {
		t.Errorf("resources in %s has %d rows, want 1", path, n)
	}
}

// TestStoreKeepsConnections: concurrent calls share a few connections
// that stay open, instead of opening and closing one per call.
func TestStoreKeepsConnections(t *testing.T) {
	st, _ := newTestStore(t)
	mustAdd(t, st, "a", 1)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 40 {
				if _, err := st.list(t.Context(), ""); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	stats := st.db.Stats()
	if stats.MaxIdleClosed != 0 || stats.MaxLifetimeClosed != 0 || stats.OpenConnections > maxConns {
		t.Fatalf("connections opened and closed again: %+v", stats)
	}
}
