package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestDialectStreamsMatchTheirSchemas reads the event schemas the bridge
// publishes in /openapi.json (each dialect's stream names its event's
// component in x-itemSchema) and checks every event of live /api/chat and
// /api/conversation streams against them: a tool call, a reply, an approval.
func TestDialectStreamsMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: defaultConfig(t)})
	resp, err := http.Get(m.url("/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %v", resp.StatusCode, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, conversation string
		bodies             []map[string]any
		want               []string // event types the streams must show
	}{
		{path: "/api/chat", conversation: "conversationId",
			bodies: []map[string]any{{"message": "list all resources"}, {"message": "add resource web-1 with value 7"}},
			want:   []string{"log", "text", "data", "done"}},
		{path: "/api/conversation", conversation: "sessionId",
			bodies: []map[string]any{{"message": "list all resources"}, {"message": "add resource web-2 with value 8"}},
			want:   []string{"activity.start", "message.start", "message.content", "message.end", "tool_call.start", "tool_call.end", "activity.end", "approval.requested"}},
	} {
		t.Run(strings.TrimPrefix(tt.path, "/api/"), func(t *testing.T) {
			ref := str(doc, "paths", tt.path, "post", "responses", "200", "content", "text/event-stream", "x-itemSchema", "$ref")
			name, ok := strings.CutPrefix(ref, "#/components/schemas/")
			if !ok {
				t.Fatalf("%s: the stream names no event schema (x-itemSchema %q)", tt.path, ref)
			}
			schema := resolveComponent(t, obj(doc, "components", "schemas"), name)
			seen := map[string]bool{}
			for i, body := range tt.bodies {
				body[tt.conversation] = "schema-" + strings.TrimPrefix(tt.path, "/api/") + "-" + string(rune('a'+i))
				status, stream := m.stream("POST", tt.path, body)
				if status != http.StatusOK {
					t.Fatalf("POST %s %v: %d %s", tt.path, body, status, stream)
				}
				for _, line := range strings.Split(stream, "\n") {
					data, ok := strings.CutPrefix(line, "data: ")
					if !ok {
						continue
					}
					var ev any
					if err := json.Unmarshal([]byte(data), &ev); err != nil {
						t.Fatalf("event %s: %v", data, err)
					}
					if err := schema.Validate(ev); err != nil {
						t.Errorf("event %s does not match %s: %v", data, name, err)
					}
					seen[str(ev, "type")] = true
				}
			}
			for _, typ := range tt.want {
				if !seen[typ] {
					t.Errorf("the streams showed no %s event (saw %v)", typ, seen)
				}
			}
		})
	}
}

// resolveComponent is component name of an OpenAPI document's schemas, as
// a standalone JSON Schema.
func resolveComponent(t *testing.T, components map[string]any, name string) *jsonschema.Resolved {
	t.Helper()
	defs, err := json.Marshal(components)
	if err != nil {
		t.Fatal(err)
	}
	defs = []byte(strings.ReplaceAll(string(defs), `"#/components/schemas/`, `"#/$defs/`))
	root := `{"$schema":"https://json-schema.org/draft/2020-12/schema","$ref":"#/$defs/` + name + `","$defs":` + string(defs) + `}`
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(root), &s); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	return r
}
