package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// checkLogLines fails t unless every line of the log file at path is one
// JSON object in which no object holds a key twice: log lines are data for
// a pipeline, and log tools keep only the last of a doubled key. It also
// fails on a permissions violation of a role's own NATS connection: each
// role doing its job within its permissions is what the whole suite, run
// with NATS identities on, proves. (A reply the server refused a responder,
// because its requester aimed it outside the inboxes, is logged otherwise:
// that refusal is the permissions doing their job.)
func checkLogLines(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read the mesh's log: %v", err)
		return
	}
	bad := 0
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := strictJSONObject(line); err != nil {
			if bad++; bad > 10 {
				t.Errorf("%s: more bad log lines", filepath.Base(path))
				return
			}
			t.Errorf("%s:%d: %v:\n%s", filepath.Base(path), i+1, err, line)
			continue
		}
		if err := documentedFields(line); err != nil {
			if bad++; bad > 10 {
				t.Errorf("%s: more bad log lines", filepath.Base(path))
				return
			}
			t.Errorf("%s:%d: %v:\n%s", filepath.Base(path), i+1, err, line)
			continue
		}
		if bytes.Contains(line, []byte(`"nats async error"`)) && bytes.Contains(line, []byte("permissions violation")) {
			if bad++; bad > 10 {
				t.Errorf("%s: more bad log lines", filepath.Base(path))
				return
			}
			t.Errorf("%s:%d: a role was refused by its NATS permissions:\n%s", filepath.Base(path), i+1, line)
		}
	}
}

// documentedFields checks the fields README's "Observe it" documents for a
// log pipeline: time, level and message on every line, role on every line
// and node on every role process's line (the supervisor of `mesh up` is
// role "up", the embedded server "nats"), and sid and trace_id, when
// present, in their shapes.
func documentedFields(line []byte) error {
	var f map[string]any
	if err := json.Unmarshal(line, &f); err != nil {
		return err
	}
	for _, k := range []string{"time", "level", "message", "role"} {
		if s, _ := f[k].(string); s == "" {
			return fmt.Errorf("no %q", k)
		}
	}
	if role := f["role"]; role != "up" && role != "nats" {
		if s, _ := f["node"].(string); s == "" {
			return errors.New(`no "node"`)
		}
	}
	if v, ok := f["trace_id"]; ok && !traceID.MatchString(fmt.Sprint(v)) {
		return fmt.Errorf("trace_id %v is not 32 hex digits", v)
	}
	if v, ok := f["sid"]; ok && fmt.Sprint(v) == "" {
		return errors.New("an empty sid")
	}
	return nil
}

var traceID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// strictJSONObject decodes line token by token: one JSON object, nothing
// after it, and no key twice in any object at any depth.
func strictJSONObject(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	if err := strictObject(dec, "the line"); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// strictObject reads the members of an object whose '{' was read, and its '}'.
func strictObject(dec *json.Decoder, where string) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key %v is not a string", tok)
		}
		if seen[key] {
			return fmt.Errorf("key %q twice in %s", key, where)
		}
		seen[key] = true
		if err := strictValue(dec, strconv.Quote(key)); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// strictValue reads one value, checking the objects within it.
func strictValue(dec *json.Decoder, where string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return strictObject(dec, where)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := strictValue(dec, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}

func TestDocumentedFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		line    string
		wantErr bool
	}{
		{"role process", `{"level":"info","role":"agent","node":"h-agent-1","time":"2026-01-01T00:00:00Z","message":"turn done","sid":"ab12cd34","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`, false},
		{"supervisor", `{"level":"info","role":"up","process":"agent","time":"2026-01-01T00:00:00Z","message":"started"}`, false},
		{"no node", `{"level":"info","role":"agent","time":"2026-01-01T00:00:00Z","message":"x"}`, true},
		{"no time", `{"level":"info","role":"agent","node":"n","message":"x"}`, true},
		{"no message", `{"level":"info","role":"agent","node":"n","time":"t"}`, true},
		{"no role", `{"level":"info","node":"n","time":"t","message":"x"}`, true},
		{"bad trace id", `{"level":"info","role":"agent","node":"n","time":"t","message":"x","trace_id":"xyz"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := documentedFields([]byte(tt.line)); (err != nil) != tt.wantErr {
				t.Errorf("documentedFields(%s) = %v, want error %v", tt.line, err, tt.wantErr)
			}
		})
	}
}

func TestStrictJSONObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		line    string
		wantErr bool
	}{
		{"flat", `{"level":"info","role":"agent","node":"a-1","msg":"ready"}`, false},
		{"nested", `{"node":{"node":"x","role":"agent"},"list":[{"a":1},{"a":2}],"msg":"node down"}`, false},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2}}`, false},
		{"doubled key", `{"role":"monitor","level":"info","role":"monitor"}`, true},
		{"doubled key nested", `{"node":{"node":"x","node":"y"}}`, true},
		{"doubled key in array", `{"l":[{"a":1,"a":2}]}`, true},
		{"not JSON", `WARNING: DATA RACE`, true},
		{"array", `[1,2]`, true},
		{"two objects", `{"a":1}{"b":2}`, true},
		{"trailing text", `{"a":1} and more`, true},
		{"truncated", `{"a":1,"b":`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := strictJSONObject([]byte(tt.line))
			if (err != nil) != tt.wantErr {
				t.Errorf("strictJSONObject(%s) = %v, want error %v", tt.line, err, tt.wantErr)
			}
		})
	}
}
