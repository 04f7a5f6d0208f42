package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// The hand-written request body is json.Marshal's, byte for byte, whatever
// the text holds (HTML characters, control characters, invalid UTF-8,
// U+2028), with and without tools, sampling settings, files and streaming;
// the tools encoded once follow the list when it changes.
func TestOpenAIEncoding(t *testing.T) {
	texts := []string{"", "plain text", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f\b\f",
		"café ☕ 😀", "bad \xff\xfe utf-8", "line\u2028sep\u2029", "\x7f del"}
	temp, topP := 0.7, 1e-7
	schemaA := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"a <query> & more"}}}`)
	schemaB := json.RawMessage(`{"properties": {"n": {"type": "integer"}}}`)
	toolLists := [][]Tool{nil,
		{{Name: "search", Description: "find <things>", Parameters: schemaA}},
		{{Name: "search", Description: "find <things>", Parameters: schemaA}, {Name: "count", Parameters: schemaB}},
		{{Name: "search", Description: "find other things", Parameters: schemaA}},
		{{Name: "search", Description: "find <things>", Parameters: schemaA}},
	}
	for _, name := range []string{"gpt-4o-mini", "o4-mini", "ollama:llama3.2"} {
		p := newOpenAI(model(t, name), Options{}, openAIDefaultBase)
		for i, text := range texts {
			msgs := []Message{
				{Role: RoleUser, Content: text},
				{Role: RoleAssistant, Content: text, ToolCalls: []ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":` + fmt.Sprintf("%q", text) + `}`)}}},
				{Role: RoleTool, Content: text, ToolCallID: "c1", ToolName: "search", IsError: i%2 == 0},
				{Role: RoleAssistant, Content: text},
				{Role: RoleUser, Content: text, Files: []File{{MediaType: "image/png", Data: []byte{1, 2, 3}}, {MediaType: "text/plain", Data: []byte(text)}}},
			}
			for j, tools := range toolLists {
				req := Request{System: text, Messages: msgs[:1+(i+j)%len(msgs)], Tools: tools}
				if j%2 == 1 {
					req.Sampling = modelspec.Sampling{MaxTokens: 100 + j, Temperature: &temp, TopP: &topP}
				}
				reqs := []Request{req, {}, {Messages: []Message{{Role: RoleTool, Content: text, ToolCallID: "orphan"}}}}
				for k, stream := range []bool{false, true} {
					req := reqs[(i+j+k)%len(reqs)]
					if k == 0 {
						req = reqs[0]
					}
					want, err := json.Marshal(p.request(req, stream))
					if err != nil {
						t.Fatal(err)
					}
					got, err := p.encode(req, stream)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s, text %d, tools %d, stream %v:\n got %s\nwant %s", name, i, j, stream, got, want)
					}
				}
			}
		}
	}
}

// A tool list whose schema bytes are changed in place after a call is
// encoded again: the kept list is a copy.
func TestOpenAIToolsKeptCopy(t *testing.T) {
	var c toolsJSON
	schema := []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	tools := []Tool{{Name: "t", Parameters: schema}}
	first, err := c.encode(tools)
	if err != nil {
		t.Fatal(err)
	}
	copy(schema[bytes.Index(schema, []byte("string")):], "number")
	second, err := c.encode(tools)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, second) || !bytes.Contains(second, []byte(`"number"`)) {
		t.Fatalf("the changed schema was not encoded again: %s", second)
	}
}

// appendJSONString writes what json.Marshal writes for every string.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `a "quoted" \ path`, "<a href='x'>&</a>", "\x00\x01\b\f\n\r\t\x1f\x7f", "café", "\xff", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("%q: got %s, want %s", s, got[1:], want)
		}
	})
}
