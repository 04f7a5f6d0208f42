package a2a

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

func TestForkOfReadsTheExtensionsMetadata(t *testing.T) {
	for _, c := range []struct {
		name     string
		metadata map[string]any
		want     *forkMeta
		wantErr  string
	}{
		{name: "no metadata"},
		{name: "other metadata", metadata: map[string]any{"name": "x", "https://example.org/ext": map[string]any{"from": "c0"}}},
		{name: "before", metadata: map[string]any{wire.ExtensionFork: map[string]any{"from": "c0", "before": "m1"}}, want: &forkMeta{From: "c0", Before: "m1"}},
		{name: "after", metadata: map[string]any{wire.ExtensionFork: map[string]any{"from": "c0", "after": "m1"}}, want: &forkMeta{From: "c0", After: "m1"}},
		{name: "event_seq", metadata: map[string]any{wire.ExtensionFork: map[string]any{"from": "c0", "event_seq": 7.0}}, want: &forkMeta{From: "c0"}},
		{name: "no point", metadata: map[string]any{wire.ExtensionFork: map[string]any{"from": "c0"}}, wantErr: "names 0 points"},
		{name: "two points", metadata: map[string]any{wire.ExtensionFork: map[string]any{"from": "c0", "before": "m1", "event_seq": 3.0}}, wantErr: "names 2 points"},
		{name: "no from", metadata: map[string]any{wire.ExtensionFork: map[string]any{"after": "m1"}}, wantErr: "a context id is"},
		{name: "bad message id", metadata: map[string]any{wire.ExtensionFork: map[string]any{"from": "c0", "after": "a b"}}, wantErr: "a message id is"},
		{name: "unknown field", metadata: map[string]any{wire.ExtensionFork: map[string]any{"from": "c0", "after": "m1", "message": "hi"}}, wantErr: "unknown field"},
		{name: "not an object", metadata: map[string]any{wire.ExtensionFork: "c0"}, wantErr: "is {"},
	} {
		got, err := forkOf(&wire.Message{Metadata: c.metadata})
		switch {
		case c.wantErr != "":
			if err == nil || err.Code != wire.CodeInvalidParams || !strings.Contains(err.Message, c.wantErr) {
				t.Errorf("%s: %+v, %v; want invalid params saying %q", c.name, got, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case (got == nil) != (c.want == nil):
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		case got != nil && (got.From != c.want.From || got.Before != c.want.Before || got.After != c.want.After):
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestActivateExtensionsListsBackTheForkOnly(t *testing.T) {
	for _, c := range []struct {
		name, header, value string
		want                []string
	}{
		{"1.0 header", wire.HeaderExtensions, wire.ExtensionFork, []string{wire.ExtensionFork}},
		{"0.3 header, among others", wire.HeaderExtensionsLegacy, "https://example.org/x, " + wire.ExtensionFork, []string{wire.ExtensionFork}},
		{"an unknown extension only", wire.HeaderExtensions, "https://example.org/x", nil},
	} {
		r := httptest.NewRequest(http.MethodPost, "/a2a", nil)
		r.Header.Set(c.header, c.value)
		w := httptest.NewRecorder()
		activateExtensions(w, r)
		if got := w.Header().Values(c.header); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: answered %s %q, want %q", c.name, c.header, got, c.want)
		}
	}
}
