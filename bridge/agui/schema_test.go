package agui

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

var (
	eventSchemasOnce sync.Once
	eventSchemas     map[string]*jsonschema.Resolved
	eventSchemasErr  error
)

// eventSchema is EventSchemas' schema name, resolved.
func eventSchema(t *testing.T, name string) *jsonschema.Resolved {
	t.Helper()
	eventSchemasOnce.Do(func() {
		eventSchemas = map[string]*jsonschema.Resolved{}
		for _, n := range []string{"SimpleEvent", "DottedEvent"} {
			root := map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": EventSchemas("#/$defs/"), "$ref": "#/$defs/" + n}
			data, err := json.Marshal(root)
			if err != nil {
				eventSchemasErr = err
				return
			}
			var s jsonschema.Schema
			if err := json.Unmarshal(data, &s); err != nil {
				eventSchemasErr = err
				return
			}
			r, err := s.Resolve(nil)
			if err != nil {
				eventSchemasErr = err
				return
			}
			eventSchemas[n] = r
		}
	})
	if eventSchemasErr != nil {
		t.Fatalf("event schemas: %v", eventSchemasErr)
	}
	return eventSchemas[name]
}

// checkSchema checks each event's data (one JSON value a line, or a
// stream's data lines) against schema name.
func checkSchema(t *testing.T, name string, events []string) {
	t.Helper()
	s := eventSchema(t, name)
	for _, data := range events {
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Errorf("event %s: %v", data, err)
			continue
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("event %s does not match %s: %v", data, name, err)
		}
	}
}

// lines splits one JSON value a line, skipping the transcript's notes.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// The schemas are not blind: events that break them are refused.
func TestEventSchemasRefuseBrokenEvents(t *testing.T) {
	tests := []struct{ schema, event string }{
		{"SimpleEvent", `{"type":"text"}`},
		{"SimpleEvent", `{"type":"text","delta":"a","extra":1}`},
		{"SimpleEvent", `{"type":"done","stats":{"executionTime":1,"agentInvocations":0}}`},
		{"SimpleEvent", `{"type":"data","structuredData":{"type":"chart"}}`},
		{"SimpleEvent", `{"type":"error","error":{"code":"UNKNOWN"}}`},
		{"SimpleEvent", `{"type":"message.start","messageId":"m"}`},
		{"DottedEvent", `{"type":"message.start","messageId":"m"}`},
		{"DottedEvent", `{"type":"message.content","timestamp":1,"messageId":"m","content":5}`},
		{"DottedEvent", `{"type":"tool_call.start","timestamp":1,"toolCallId":"c"}`},
		{"DottedEvent", `{"type":"log","timestamp":1,"content":"x"}`},
	}
	for _, tt := range tests {
		var v any
		if err := json.Unmarshal([]byte(tt.event), &v); err != nil {
			t.Fatal(err)
		}
		if eventSchema(t, tt.schema).Validate(v) == nil {
			t.Errorf("%s accepts %s", tt.schema, tt.event)
		}
	}
}

// Every event of every ending the translators know matches its dialect's
// schema.
func TestTranslatedEventsMatchSchemas(t *testing.T) {
	result := map[string]any{"response": "Done.", "usage": map[string]any{"input_tokens": 3, "output_tokens": 4}, "intent": "create"}
	for _, end := range translatorEnds(result) {
		checkSchema(t, "DottedEvent", lines(dottedLines(t, runEvents(end.ev))))
		checkSchema(t, "DottedEvent", lines(dottedOneMessageLines(t, runEvents(end.ev))))
		checkSchema(t, "SimpleEvent", lines(simpleLines(t, runEvents(end.ev))))
	}
}
