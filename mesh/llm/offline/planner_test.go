package offline

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// resourceTools are the tools of the sample MCP server (cmd/mcp-resources).
func resourceTools() []llm.Tool {
	return []llm.Tool{
		{
			Name:        "resources_list",
			Description: "List resources, optionally filtered by a name pattern (regular expression)",
			ReadOnly:    true,
			Parameters: json.RawMessage(`{"type":"object","properties":{
				"pattern":{"type":"string","description":"Regular expression matched against resource names"}}}`),
		},
		{
			Name:        "resources_add",
			Description: "Add (create) a new resource with a name and an integer value",
			Destructive: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{
				"name":{"type":"string","description":"Name of the resource"},
				"value":{"type":"integer","description":"Integer value"}},
				"required":["name","value"]}`),
		},
		{
			Name:        "resources_remove",
			Description: "Remove (delete) resources by id or by name pattern (regular expression)",
			Destructive: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{
				"id":{"type":"string","description":"Resource id"},
				"pattern":{"type":"string","description":"Regular expression matched against resource names"}}}`),
		},
	}
}

// memoryTools are the tools of @modelcontextprotocol/server-memory, as it
// lists them.
func memoryTools() []llm.Tool {
	entity := `{"type":"object","properties":{
		"name":{"type":"string","description":"The name of the entity"},
		"entityType":{"type":"string","description":"The type of the entity"},
		"observations":{"type":"array","items":{"type":"string"},"description":"An array of observation contents associated with the entity"}},
		"required":["name","entityType","observations"]}`
	relation := `{"type":"object","properties":{
		"from":{"type":"string","description":"The name of the entity where the relation starts"},
		"to":{"type":"string","description":"The name of the entity where the relation ends"},
		"relationType":{"type":"string","description":"The type of the relation"}},
		"required":["from","to","relationType"]}`
	return []llm.Tool{
		{Name: "create_entities", Description: "Create multiple new entities in the knowledge graph",
			Parameters: json.RawMessage(`{"type":"object","properties":{"entities":{"type":"array","items":` + entity + `}},"required":["entities"]}`)},
		{Name: "create_relations", Description: "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
			Parameters: json.RawMessage(`{"type":"object","properties":{"relations":{"type":"array","items":` + relation + `}},"required":["relations"]}`)},
		{Name: "add_observations", Description: "Add new observations to existing entities in the knowledge graph",
			Parameters: json.RawMessage(`{"type":"object","properties":{"observations":{"type":"array","items":{"type":"object","properties":{
				"entityName":{"type":"string","description":"The name of the entity to add the observations to"},
				"contents":{"type":"array","items":{"type":"string"},"description":"An array of observation contents to add"}},
				"required":["entityName","contents"]}}},"required":["observations"]}`)},
		{Name: "delete_entities", Description: "Delete multiple entities and their associated relations from the knowledge graph", Destructive: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{"entityNames":{"type":"array","items":{"type":"string"},"description":"An array of entity names to delete"}},"required":["entityNames"]}`)},
		{Name: "delete_observations", Description: "Delete specific observations from entities in the knowledge graph", Destructive: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{"deletions":{"type":"array","items":{"type":"object","properties":{
				"entityName":{"type":"string"},"observations":{"type":"array","items":{"type":"string"}}},
				"required":["entityName","observations"]}}},"required":["deletions"]}`)},
		{Name: "delete_relations", Description: "Delete multiple relations from the knowledge graph", Destructive: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{"relations":{"type":"array","items":` + relation + `}},"required":["relations"]}`)},
		{Name: "read_graph", Description: "Read the entire knowledge graph", ReadOnly: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		{Name: "search_nodes", Description: "Search for nodes in the knowledge graph based on a query", ReadOnly: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"The search query to match against entity names, types, and observation content"}},"required":["query"]}`)},
		{Name: "open_nodes", Description: "Open specific nodes in the knowledge graph by their names", ReadOnly: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"},"description":"An array of entity names to retrieve"}},"required":["names"]}`)},
	}
}

func generate(t *testing.T, req llm.Request) *llm.Response {
	t.Helper()
	resp, err := New().Generate(t.Context(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return resp
}

func userSays(text string) []llm.Message { return []llm.Message{{Role: llm.RoleUser, Content: text}} }

// decode decodes a JSON object for comparison.
func decode(t *testing.T, raw string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

type planCase struct {
	name     string
	input    string
	wantTool string
	wantArgs string // JSON object
}

func runPlanCases(t *testing.T, tools []llm.Tool, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := generate(t, llm.Request{System: "You manage things.", Messages: userSays(tc.input), Tools: tools})
			if len(resp.ToolCalls) != 1 {
				t.Fatalf("%q: got %d tool calls, text %q; want one call of %s", tc.input, len(resp.ToolCalls), resp.Text, tc.wantTool)
			}
			call := resp.ToolCalls[0]
			if call.Name != tc.wantTool {
				t.Errorf("%q: tool = %s, want %s", tc.input, call.Name, tc.wantTool)
			}
			if got, want := decode(t, string(call.Arguments)), decode(t, tc.wantArgs); !reflect.DeepEqual(got, want) {
				t.Errorf("%q: arguments = %s, want %s", tc.input, call.Arguments, tc.wantArgs)
			}
			if resp.Text != "" {
				t.Errorf("%q: text = %q with a tool call, want empty", tc.input, resp.Text)
			}
			if !strings.HasPrefix(call.ID, "call_") || len(call.ID) != len("call_")+12 {
				t.Errorf("%q: call id = %q, want call_ and 12 hex digits", tc.input, call.ID)
			}
			if resp.StopReason != stopTool {
				t.Errorf("%q: stop reason = %q, want %q", tc.input, resp.StopReason, stopTool)
			}
		})
	}
}

func TestOfflinePlanResources(t *testing.T) {
	runPlanCases(t, resourceTools(), []planCase{
		{"lone verb", "list", "resources_list", `{}`},
		{"show me all", "show me all resources", "resources_list", `{}`},
		{"list all", "list all resources", "resources_list", `{}`},
		{"list resources", "list resources", "resources_list", `{}`},
		{"overview", "give me a full overview of all resources", "resources_list", `{}`},
		{"overview short", "give me an overview of all resources", "resources_list", `{}`},
		{"question", "what resources do we have?", "resources_list", `{}`},
		{"how many", "How many resources are there?", "resources_list", `{}`},
		{"matching", "show resources matching test", "resources_list", `{"pattern":"test"}`},
		{"named", "show resources named test-1", "resources_list", `{"pattern":"^test-1$"}`},
		{"containing", "list resources containing a.b", "resources_list", `{"pattern":"a\\.b"}`},
		{"create server", "create a server test-1 with value 10", "resources_add", `{"name":"test-1","value":10}`},
		{"add without with", "add resource test-2 value 20", "resources_add", `{"name":"test-2","value":20}`},
		{"create my-test", "create a server my-test with value 42", "resources_add", `{"name":"my-test","value":42}`},
		{"a2a item", "add resource a2a-test-item with value 77", "resources_add", `{"name":"a2a-test-item","value":77}`},
		{"web-1", "add resource web-1 with value 7", "resources_add", `{"name":"web-1","value":7}`},
		{"seq-test", "add resource seq-test with value 55", "resources_add", `{"name":"seq-test","value":55}`},
		{"test-seq", "add resource test-seq with value 55", "resources_add", `{"name":"test-seq","value":55}`},
		{"chain-test", "add resource chain-test with value 99", "resources_add", `{"name":"chain-test","value":99}`},
		{"value equals", "add resource alpha value=3", "resources_add", `{"name":"alpha","value":3}`},
		{"value colon", "add resource beta value: 4", "resources_add", `{"name":"beta","value":4}`},
		{"only number", "please add a new resource Gamma 5", "resources_add", `{"name":"Gamma","value":5}`},
		{"named keyword", "create a resource named delta with a value of 6", "resources_add", `{"name":"delta","value":6}`},
		{"quoted name", `add resource "my thing" with value 8`, "resources_add", `{"name":"my thing","value":8}`},
		{"value first", "add with value 9 a resource epsilon", "resources_add", `{"name":"epsilon","value":9}`},
		{"negative", "add resource cold with value -3", "resources_add", `{"name":"cold","value":-3}`},
		{"remove name", "remove test-1", "resources_remove", `{"pattern":"^test-1$"}`},
		{"delete resource", "delete resource test-2", "resources_remove", `{"pattern":"^test-2$"}`},
		{"delete id", "delete resource res_0123456789ab", "resources_remove", `{"id":"res_0123456789ab"}`},
		{"delete uuid", "remove 1b4e28ba-2fa1-11d2-883f-0016d3cca427", "resources_remove", `{"id":"1b4e28ba-2fa1-11d2-883f-0016d3cca427"}`},
		{"delete matching", "delete resources matching ^tmp-", "resources_remove", `{"pattern":"^tmp-"}`},
		{"delete regex chars", "remove resource a.b", "resources_remove", `{"pattern":"^a\\.b$"}`},
		{"get rid of", "get rid of web-1", "resources_remove", `{"pattern":"^web-1$"}`},
		{"drop", "drop the resource seq-test please", "resources_remove", `{"pattern":"^seq-test$"}`},
	})
}

func TestOfflinePlanMemory(t *testing.T) {
	runPlanCases(t, memoryTools(), []planCase{
		{"show graph", "show the graph", "read_graph", `{}`},
		{"read graph", "read the knowledge graph", "read_graph", `{}`},
		{"lone verb", "list", "read_graph", `{}`},
		{"search for", "search nodes for alice", "search_nodes", `{"query":"alice"}`},
		{"find", "find alice", "search_nodes", `{"query":"alice"}`},
		{"search two words", "search for alice smith", "search_nodes", `{"query":"alice smith"}`},
		{"open nodes", "open nodes alice and bob", "open_nodes", `{"names":["alice","bob"]}`},
		{"delete entity", "delete entity alice", "delete_entities", `{"entityNames":["alice"]}`},
		{"create entity", "create entity alice of type person", "create_entities",
			`{"entities":[{"name":"alice","entityType":"person","observations":[]}]}`},
	})
}

// TestOfflinePlanDelegate: a tool that names no action (an agent reached
// over A2A) gets the whole request in its message property.
func TestOfflinePlanDelegate(t *testing.T) {
	tools := []llm.Tool{{
		Name:        "resource_agent",
		Description: "Agent B: manages resources on the resource server",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
	}}
	runPlanCases(t, tools, []planCase{
		{"list", "list all resources", "resource_agent", `{"message":"list all resources"}`},
		{"add", "add resource chain-test with value 77", "resource_agent", `{"message":"add resource chain-test with value 77"}`},
	})
}

func TestOfflineAsks(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"missing value", "add resource test-3", "To add a resource I need: value."},
		{"missing name and value", "create a resource", "To create a resource I need: name, value."},
		{"remove what", "remove resources", "To remove a resource I need one of: id, pattern."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := generate(t, llm.Request{Messages: userSays(tc.input), Tools: resourceTools()})
			if len(resp.ToolCalls) != 0 {
				t.Fatalf("%q: got call %s %s, want a question", tc.input, resp.ToolCalls[0].Name, resp.ToolCalls[0].Arguments)
			}
			if resp.Text != tc.want {
				t.Errorf("%q: text = %q, want %q", tc.input, resp.Text, tc.want)
			}
		})
	}
}

func TestOfflineTextAnswers(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		tools    []llm.Tool
		contains []string
	}{
		{"greeting", "hello", resourceTools(), []string{"Hello", "not an LLM"}},
		{"thanks", "thanks!", resourceTools(), []string{"welcome"}},
		{"help", "help", resourceTools(), []string{"not an LLM", "- resources_list: List resources", "- resources_add: Add (create)", "- resources_remove:"}},
		{"what can you do", "What can you do?", memoryTools(), []string{"not an LLM", "- read_graph: Read the entire knowledge graph"}},
		{"empty", "", resourceTools(), []string{"not an LLM", "resources_list"}},
		{"no match", "sing me a song", resourceTools(), []string{`could not match "sing me a song"`, "not an LLM", "- resources_add"}},
		{"no update tool", "rename test-1 to test-2", resourceTools(), []string{"could not match", "resources_remove"}},
		{"no tools", "list all resources", nil, []string{"not an LLM", "No tools are available", "as it is: list all resources"}},
		{"exit_loop not listed", "help", append(resourceTools(), llm.Tool{Name: exitLoopTool}), []string{"resources_list"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := generate(t, llm.Request{Messages: userSays(tc.input), Tools: tc.tools})
			if len(resp.ToolCalls) != 0 {
				t.Fatalf("%q: got call %s, want text", tc.input, resp.ToolCalls[0].Name)
			}
			for _, want := range tc.contains {
				if !strings.Contains(resp.Text, want) {
					t.Errorf("%q: text %q does not contain %q", tc.input, resp.Text, want)
				}
			}
			if strings.Contains(tc.name, "exit_loop") && strings.Contains(resp.Text, exitLoopTool) {
				t.Errorf("text %q lists %s", resp.Text, exitLoopTool)
			}
		})
	}
}

// TestOfflineRelay: with no tools the planner passes on what it was
// given, and a next offline step can act on that text.
func TestOfflineRelay(t *testing.T) {
	t.Run("previous steps", func(t *testing.T) {
		msgs := []llm.Message{
			{Role: llm.RoleUser, Content: "give me an overview of all resources"},
			{Role: llm.RoleAssistant, Name: "list-all", Content: "Found 1 resource:\n- a (value 1)"},
			{Role: llm.RoleAssistant, Name: "count-analysis", Content: "There is 1 resource."},
		}
		resp := generate(t, llm.Request{Messages: msgs})
		for _, want := range []string{"not an LLM", "list-all: Found 1 resource:\n- a (value 1)", "count-analysis: There is 1 resource."} {
			if !strings.Contains(resp.Text, want) {
				t.Errorf("text %q does not contain %q", resp.Text, want)
			}
		}
	})
	t.Run("next step acts", func(t *testing.T) {
		first := generate(t, llm.Request{Messages: userSays("add resource test-1 with value 10")})
		runPlanCases(t, resourceTools(), []planCase{
			{"relayed", first.Text, "resources_add", `{"name":"test-1","value":10}`},
		})
	})
}

func TestOfflineModel(t *testing.T) {
	if got := New().Model(); got != "offline" {
		t.Errorf("Model() = %q, want offline", got)
	}
}

// TestOfflineDeterministic: the same request gets the same answer, call
// id included.
func TestOfflineDeterministic(t *testing.T) {
	req := llm.Request{Messages: userSays("add resource test-2 value 20"), Tools: resourceTools()}
	a, b := generate(t, req), generate(t, req)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two answers to one request differ:\n%+v\n%+v", a, b)
	}
}

func TestOfflineUsage(t *testing.T) {
	resp := generate(t, llm.Request{Messages: userSays("list all resources"), Tools: resourceTools()})
	if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 {
		t.Errorf("usage = %+v, want both counts above zero", resp.Usage)
	}
}

func TestOfflineStreaming(t *testing.T) {
	var deltas []string
	req := llm.Request{
		Messages: userSays("help"),
		Tools:    resourceTools(),
		OnText:   func(d string) { deltas = append(deltas, d) },
	}
	resp := generate(t, req)
	if got := strings.Join(deltas, ""); got != resp.Text {
		t.Errorf("deltas concatenate to %q, want Response.Text %q", got, resp.Text)
	}
	if len(deltas) < 3 {
		t.Errorf("got %d deltas, want the text in several chunks", len(deltas))
	}
	for _, d := range deltas {
		if n := len(strings.Fields(d)); n > chunkWords {
			t.Errorf("delta %q has %d words, want at most %d", d, n, chunkWords)
		}
	}
}

func TestOfflineNoTextNoDeltas(t *testing.T) {
	calls := 0
	req := llm.Request{Messages: userSays("list"), Tools: resourceTools(), OnText: func(string) { calls++ }}
	if resp := generate(t, req); len(resp.ToolCalls) != 1 || calls != 0 {
		t.Errorf("tool call answer: %d calls, %d deltas; want 1 call and no deltas", len(resp.ToolCalls), calls)
	}
}

func TestOfflineCancelled(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		resp, err := New().Generate(ctx, llm.Request{Messages: userSays("list")})
		if !errors.Is(err, context.Canceled) || resp != nil {
			t.Errorf("Generate on a cancelled context = %v, %v; want nil, context.Canceled", resp, err)
		}
	})
	t.Run("while streaming", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		deltas := 0
		req := llm.Request{
			Messages: userSays("help"),
			Tools:    resourceTools(),
			OnText: func(string) {
				deltas++
				cancel()
			},
		}
		resp, err := New().Generate(ctx, req)
		if !errors.Is(err, context.Canceled) || resp != nil {
			t.Errorf("Generate cancelled while streaming = %v, %v; want nil, context.Canceled", resp, err)
		}
		if deltas != 1 {
			t.Errorf("got %d deltas after cancelling in the first, want 1", deltas)
		}
	})
}

func TestOfflineMaxTokens(t *testing.T) {
	resp := generate(t, llm.Request{Messages: userSays("help"), Tools: resourceTools(), Sampling: modelspec.Sampling{MaxTokens: 5}})
	if len(resp.Text) > 20 || resp.StopReason != stopMax {
		t.Errorf("MaxTokens 5: text %q (%d bytes), stop %q; want at most 20 bytes and %q", resp.Text, len(resp.Text), resp.StopReason, stopMax)
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"short", "one two", []string{"one two"}},
		{"cut", "a b c d e f g h i", []string{"a b c d ", "e f g h ", "i"}},
		{"newlines kept", "a\nb  c\td\n\ne", []string{"a\nb  c\td\n\n", "e"}},
		{"leading space", "  a b c d e", []string{"  a b c d ", "e"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := textChunks(tc.in, 4)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("chunks(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Join(got, "") != tc.in {
				t.Errorf("chunks(%q) concatenate to %q", tc.in, strings.Join(got, ""))
			}
		})
	}
}

// FuzzOffline: any message against any of the tool sets gets an answer,
// with arguments that are a JSON object, and never a panic.
func FuzzOffline(f *testing.F) {
	for _, s := range []string{"list", "add resource test-2 value 20", "remove test-1", `"unterminated`, "value=", "at least 3 resources", "search for", "ñ ü 😀"} {
		f.Add(s)
	}
	sets := [][]llm.Tool{resourceTools(), memoryTools(), append(resourceTools(), llm.Tool{Name: exitLoopTool})}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tools := range sets {
			resp, err := New().Generate(context.Background(), llm.Request{Messages: userSays(s), Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) == 0 && resp.Text == "" {
				t.Fatalf("%q: neither text nor call", s)
			}
			for _, c := range resp.ToolCalls {
				var m map[string]any
				if err := json.Unmarshal(c.Arguments, &m); err != nil || m == nil {
					t.Fatalf("%q: arguments %s are not an object: %v", s, c.Arguments, err)
				}
			}
		}
	})
}
