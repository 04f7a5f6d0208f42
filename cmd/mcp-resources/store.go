package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver: SQLite in pure Go, no C compiler
)

// schema creates the tables if they are missing. Running it from two
// processes at once is safe.
const schema = `
CREATE TABLE IF NOT EXISTS resources (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	value INTEGER NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS resources_name ON resources (name);
CREATE TABLE IF NOT EXISTS calls (
	call_id TEXT PRIMARY KEY,
	tool TEXT NOT NULL,
	result TEXT NOT NULL,
	created_at TEXT NOT NULL
);
`

// timeFormat is ISO 8601 in UTC with milliseconds, so that text order is
// time order.
const timeFormat = "2006-01-02T15:04:05.000Z"

// busyTimeout is how long a statement waits for another process's lock.
const busyTimeout = 5 * time.Second

// maxConns bounds the store's connections: more concurrent calls wait for
// one (SQLite runs one write at a time anyway).
const maxConns = 8

// resource is one row of the resources table, as the tools return it.
type resource struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Value     int64  `json:"value"`
	CreatedAt string `json:"created_at" jsonschema:"ISO 8601 UTC creation time"`
	UpdatedAt string `json:"updated_at" jsonschema:"ISO 8601 UTC time of the last change"`
}

// removal is the result of a remove.
type removal struct {
	RemovedCount int      `json:"removed_count"`
	RemovedIDs   []string `json:"removed_ids"`
}

// storeConfig configures a store.
type storeConfig struct {
	// Path is the SQLite file. Required; its directory must exist.
	Path string
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// store keeps resources in SQLite. Several stores, in one process or in
// several, may share a file: writes run in BEGIN IMMEDIATE transactions and
// wait up to busyTimeout for each other.
type store struct {
	db  *sql.DB
	now func() time.Time
}

// openStore opens (creating if needed) the database at cfg.Path.
func openStore(ctx context.Context, cfg storeConfig) (*store, error) {
	if cfg.Path == "" {
		return nil, errors.New("open store: empty path")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	q := url.Values{}
	// Each pragma runs on every connection the pool opens.
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	// Escape the path so that '?' or '#' in it is not read as the query.
	u := url.URL{Scheme: "file", Opaque: escapePath(cfg.Path), RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	// Connections stay open: database/sql keeps 2 idle by default, so that
	// concurrent calls opened a connection each (PRAGMAs, schema read, WAL
	// index mapped) and closed it again, thousands of times a minute.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema in %s: %w", cfg.Path, err)
	}
	return &store{db: db, now: cfg.Now}, nil
}

// escapePath percent-encodes the characters that SQLite URI filenames
// treat specially.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// Close closes the database.
func (s *store) Close() error { return s.db.Close() }

// list returns the resources whose name matches pattern (all when empty),
// ordered by name then id. The slice is never nil.
func (s *store) list(ctx context.Context, pattern string) ([]resource, error) {
	re, err := compilePattern(pattern)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, name, value, created_at, updated_at FROM resources ORDER BY name, id`)
	if err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	defer rows.Close()
	out := []resource{}
	for rows.Next() {
		var r resource
		if err := rows.Scan(&r.ID, &r.Name, &r.Value, &r.CreatedAt, &r.UpdatedAt); err != nil {
			return nil, fmt.Errorf("list resources: %w", err)
		}
		if re == nil || re.MatchString(r.Name) {
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	return out, nil
}

// add creates a resource. With a callID, a repeated call returns the first
// result, and replayed is true.
func (s *store) add(ctx context.Context, callID, name string, value int64) (r resource, replayed bool, err error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return resource{}, false, ErrEmptyName
	}
	return once(ctx, s, callID, toolAdd, func(tx *sql.Tx) (resource, error) {
		ts := s.now().UTC().Format(timeFormat)
		r := resource{ID: newID(), Name: name, Value: value, CreatedAt: ts, UpdatedAt: ts}
		_, err := tx.ExecContext(ctx,
			`INSERT INTO resources (id, name, value, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
			r.ID, r.Name, r.Value, r.CreatedAt, r.UpdatedAt)
		if err != nil {
			return resource{}, fmt.Errorf("insert resource: %w", err)
		}
		return r, nil
	})
}

// remove deletes the resource with id, or the resources whose name matches
// pattern, or, given both, the resource with id if its name matches. With a
// callID, a repeated call returns the first result, and replayed is true.
func (s *store) remove(ctx context.Context, callID, id, pattern string) (rm removal, replayed bool, err error) {
	if id == "" && pattern == "" {
		return removal{}, false, ErrNoSelector
	}
	re, err := compilePattern(pattern)
	if err != nil {
		return removal{}, false, err
	}
	return once(ctx, s, callID, toolRemove, func(tx *sql.Tx) (removal, error) {
		query, args := `SELECT id, name FROM resources ORDER BY name, id`, []any(nil)
		if id != "" {
			query, args = `SELECT id, name FROM resources WHERE id = ?`, []any{id}
		}
		ids, err := matchingIDs(ctx, tx, re, query, args...)
		if err != nil {
			return removal{}, err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM resources WHERE id = ?`, id); err != nil {
				return removal{}, fmt.Errorf("delete resource %s: %w", id, err)
			}
		}
		return removal{RemovedCount: len(ids), RemovedIDs: ids}, nil
	})
}

// matchingIDs runs query, which selects (id, name), and returns the ids
// whose name matches re (all when re is nil). The slice is never nil.
func matchingIDs(ctx context.Context, tx *sql.Tx, re *regexp.Regexp, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("select resources: %w", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, fmt.Errorf("select resources: %w", err)
		}
		if re == nil || re.MatchString(name) {
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select resources: %w", err)
	}
	return ids, nil
}

// once runs fn in one write transaction. With a callID it first looks the id
// up in calls: a recorded result is decoded and returned (replayed) without
// running fn; otherwise fn's result is recorded under the id in the same
// transaction, so the change and its record commit together or not at all.
// The transaction is BEGIN IMMEDIATE (see openStore), so two processes
// sending the same id serialize and only one runs fn.
func once[T any](ctx context.Context, s *store, callID, tool string, fn func(*sql.Tx) (T, error)) (v T, replayed bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return v, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit

	if callID != "" {
		var gotTool, result string
		err := tx.QueryRowContext(ctx, `SELECT tool, result FROM calls WHERE call_id = ?`, callID).Scan(&gotTool, &result)
		switch {
		case err == nil:
			if gotTool != tool {
				return v, false, fmt.Errorf("%w: %q was a %s call", ErrCallIDReused, callID, gotTool)
			}
			if err := json.Unmarshal([]byte(result), &v); err != nil {
				return v, false, fmt.Errorf("decode recorded result of %q: %w", callID, err)
			}
			return v, true, nil
		case !errors.Is(err, sql.ErrNoRows):
			return v, false, fmt.Errorf("look up call %q: %w", callID, err)
		}
	}

	v, err = fn(tx)
	if err != nil {
		var zero T
		return zero, false, err
	}
	if callID != "" {
		result, err := json.Marshal(v)
		if err != nil {
			var zero T
			return zero, false, fmt.Errorf("encode result: %w", err)
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO calls (call_id, tool, result, created_at) VALUES (?, ?, ?, ?)`,
			callID, tool, string(result), s.now().UTC().Format(timeFormat))
		if err != nil {
			var zero T
			return zero, false, fmt.Errorf("record call %q: %w", callID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		var zero T
		return zero, false, fmt.Errorf("commit: %w", err)
	}
	return v, false, nil
}

// compilePattern compiles a name pattern; an empty pattern gives nil.
func compilePattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadPattern, pattern, err)
	}
	return re, nil
}

// newID returns "res_" and 12 random hex digits.
func newID() string {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand.Read documents so)
	return "res_" + hex.EncodeToString(b[:])
}
