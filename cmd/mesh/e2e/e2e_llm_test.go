package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// `mesh up` with a cloud model, its base URL pointed at a local server that
// speaks the provider's exact wire format (package llmtest), answered by
// the offline planner so that tools are picked as a model would pick them.

// llmCase is one provider as a user configures it.
type llmCase struct {
	name string
	api  llmtest.API
	// model is llm.model; wireModel the name the API receives.
	model, wireModel string
	keyEnv, baseEnv  string
}

func llmCases() []llmCase {
	return []llmCase{
		{"openai", llmtest.OpenAI, "gpt-4o-mini", "gpt-4o-mini", "OPENAI_API_KEY", "OPENAI_BASE_URL"},
		{"gemini", llmtest.Gemini, "gemini-2.5-flash", "gemini-2.5-flash", "GEMINI_API_KEY", "GEMINI_BASE_URL"},
		{"anthropic", llmtest.Anthropic, "claude-sonnet-4-5", "claude-sonnet-4-5", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
	}
}

// A command-… model goes to Cohere's OpenAI-compatible API with
// COHERE_API_KEY (the fake refuses any other key) at COHERE_BASE_URL, and
// the turn's result names the model.
func TestCohereModelThroughItsCompatibleAPI(t *testing.T) {
	t.Parallel()
	c := llmCase{"cohere", llmtest.OpenAI, "command-a-03-2025", "command-a-03-2025", "COHERE_API_KEY", "COHERE_BASE_URL"}
	m, srv := startLLMMesh(t, c, "")
	out := m.send(m.newConversation(), "list all resources")
	res := obj(out, "result")
	if str(res, "outcome") != "success" || str(res, "model") != "cohere:command-a-03-2025" {
		t.Fatalf("result %v: want success by cohere:command-a-03-2025", res)
	}
	if got := list(res, "tools_called"); !slices.Equal(got, []any{"resources_list"}) {
		t.Errorf("tools_called %v, want [resources_list]", got)
	}
	recs, _ := answeredSince(srv, 0)
	if len(recs) != 2 {
		t.Fatalf("%d model calls answered, want 2", len(recs))
	}
	checkWire(t, recs, "resources_list")
}

// llmKey is the API key of a case: distinctive, so that a leak is found.
func (c llmCase) key() string { return "test-key-" + c.name + "-Zq8yX3pL0sWv5" }

// startLLMMesh starts an llmtest server for c and `mesh up` with
// config/agent.yaml, llm.model set to c.model and the llm settings extra.
func startLLMMesh(t *testing.T, c llmCase, extra string) (*meshProc, *llmtest.Server) {
	t.Helper()
	opts, srv := llmMeshOpts(t, c, extra)
	return startMesh(t, opts), srv
}

// llmMeshOpts starts an llmtest server for c and returns the options of a
// `mesh up` that uses it: config/agent.yaml with llm.model set to c.model
// and the llm settings extra, the key and base URL in the environment.
func llmMeshOpts(t *testing.T, c llmCase, extra string) (meshOpts, *llmtest.Server) {
	t.Helper()
	srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: c.key(), Model: c.wireModel})
	cfg := defaultConfig(t)
	const offline = "\n  model: offline\n"
	if !strings.Contains(cfg, offline) {
		t.Fatalf("config/agent.yaml has no %q to replace", offline)
	}
	cfg = strings.Replace(cfg, offline, "\n  model: "+c.model+"\n"+extra, 1)
	return meshOpts{config: cfg, env: []string{c.keyEnv + "=" + c.key(), c.baseEnv + "=" + srv.BaseURL()}}, srv
}

// usageOf reads {"input_tokens", "output_tokens"}.
func usageOf(v map[string]any) llm.Usage {
	in, _ := v["input_tokens"].(float64)
	out, _ := v["output_tokens"].(float64)
	return llm.Usage{InputTokens: int(in), OutputTokens: int(out)}
}

// answeredSince sums the usage of the requests answered after the first n.
func answeredSince(srv *llmtest.Server, n int) ([]llmtest.Record, llm.Usage) {
	var recs []llmtest.Record
	var u llm.Usage
	for _, r := range srv.Requests()[n:] {
		if r.Status == http.StatusOK && r.Response != nil && r.Fault == nil {
			recs = append(recs, r)
			u = u.Add(r.Response.Usage)
		}
	}
	return recs, u
}

// checkWire asserts what every request of a turn held: the agent's prompt
// in the API's system field (not in a message), the catalog's tools, a
// stream, and each tool result of the history as a native tool result
// message answering its call, never as user text.
func checkWire(t *testing.T, recs []llmtest.Record, tool string) {
	t.Helper()
	const prompt = "You are a resource management agent."
	sawResult := false
	for i, r := range recs {
		req := r.Request
		if !strings.HasPrefix(req.System, prompt) {
			t.Errorf("request %d: system field = %q, want the agent's prompt", i, req.System)
		}
		if !r.Stream {
			t.Errorf("request %d: not streamed", i)
		}
		names := map[string]bool{}
		for _, tl := range req.Tools {
			names[tl.Name] = true
		}
		if !names["resources_list"] || !names["resources_add"] || !names["resources_remove"] {
			t.Errorf("request %d: tools %v, want the resources tools", i, names)
		}
		calls := map[string]string{}
		for j, m := range req.Messages {
			switch m.Role {
			case llm.RoleUser:
				if strings.Contains(m.Content, prompt) {
					t.Errorf("request %d message %d: the system prompt is sent as user text", i, j)
				}
				if strings.Contains(m.Content, `"count"`) || strings.Contains(m.Content, `"id"`) || strings.Contains(m.Content, "result of") {
					t.Errorf("request %d message %d: a tool result is sent as user text: %q", i, j, m.Content)
				}
			case llm.RoleAssistant:
				for _, c := range m.ToolCalls {
					calls[c.ID] = c.Name
				}
			case llm.RoleTool:
				if calls[m.ToolCallID] != m.ToolName || m.Content == "" {
					t.Errorf("request %d message %d: tool result for %q (%s) answers no call of the history %v", i, j, m.ToolCallID, m.ToolName, calls)
				}
				if m.ToolName == tool {
					sawResult = true
				}
			}
		}
	}
	if !sawResult {
		t.Errorf("no request carried the result of %s as a native tool result", tool)
	}
}

// turnEvents replays the conversation's events up to the first of type
// until.
func turnEvents(t *testing.T, m *meshProc, conv, until string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r := openSSE(t, ctx, m.url("/conversations/"+conv+"/events"), "")
	defer r.close()
	var out []map[string]any
	for _, ev := range readUntil(t, r, until) {
		var v map[string]any
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Fatalf("event %s: %v", ev.data, err)
		}
		out = append(out, v)
	}
	return out
}

// mcpServerEnv is the environment of the sample MCP server under m.
func mcpServerEnv(t *testing.T, m *meshProc) string {
	t.Helper()
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	for _, p := range descendants(cmd.Process.Pid) {
		if args := cmdline(p); len(args) > 0 && filepath.Base(args[0]) == "mcp-resources" {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
			if err != nil {
				t.Fatalf("environment of mcp-resources: %v", err)
			}
			return string(data)
		}
	}
	t.Fatal("no mcp-resources process under mesh up")
	return ""
}

// TestLLMProvidersEndToEnd: for each cloud provider, `mesh up` with its key
// and base URL from the environment completes a read-only tool call and a
// destructive call approved, then run, sending the provider's wire format,
// recording token usage, and never writing the key to its logs or data.
func TestLLMProvidersEndToEnd(t *testing.T) {
	t.Parallel()
	for _, c := range llmCases() {
		t.Run(c.name, func(t *testing.T) {
			m, srv := startLLMMesh(t, c, "  timeout: 20s\n")

			t.Run("read-only call", func(t *testing.T) {
				conv := m.newConversation()
				before := srv.Count()
				out := m.send(conv, "list all resources")
				res := obj(out, "result")
				if res["waiting_approval"] != false || str(out, "conversation", "status") != "active" {
					t.Fatalf("result %v, status %s: want an answer and an active conversation", res, str(out, "conversation", "status"))
				}
				calls := toolCalls(obj(out, "conversation"))
				if len(calls) != 1 || str(calls[0], "name") != "resources_list" {
					t.Fatalf("tool calls = %v, want one resources_list", calls)
				}
				results := messagesOf(obj(out, "conversation"), "tool")
				if len(results) != 1 || !strings.Contains(str(res, "response"), "resources") {
					t.Errorf("response %q, tool results %v: want the listing reported", str(res, "response"), results)
				}
				recs, used := answeredSince(srv, before)
				if len(recs) != 2 {
					t.Fatalf("%d model calls answered, want 2 (the call, then the report)", len(recs))
				}
				checkWire(t, recs, "resources_list")
				if want := "resources_list"; str(res, "model") == "" || !slices.Equal(list(res, "tools_called"), []any{want}) {
					t.Errorf("result model %q, tools_called %v; want the model and [%s]", str(res, "model"), list(res, "tools_called"), want)
				}
				got := usageOf(obj(res, "usage"))
				if got != used || got.InputTokens == 0 || got.OutputTokens == 0 {
					t.Errorf("result usage %+v, want the %+v the provider reported", got, used)
				}
				conversation := m.do(http.StatusOK, "GET", "/conversations/"+conv, nil)
				if lr := usageOf(obj(conversation, "conversation", "last_run", "usage")); lr != used {
					t.Errorf("last_run usage %+v, want %+v", lr, used)
				}
				// The events: the answer streamed in several deltas, the
				// usage in RUN_FINISHED.
				events := turnEvents(t, m, conv, "RUN_FINISHED")
				deltas := map[string][]string{}
				var last string
				var finished map[string]any
				for _, ev := range events {
					switch str(ev, "type") {
					case "TEXT_MESSAGE_CONTENT":
						id := str(ev, "messageId")
						deltas[id] = append(deltas[id], str(ev, "delta"))
						last = id
					case "RUN_FINISHED":
						finished = ev
					}
				}
				// The offline planner behind the fake streams four words
				// a piece: an answer longer than that comes in several.
				answer := str(res, "response")
				pieces := 1
				if len(strings.Fields(answer)) > 4 {
					pieces = 2
				}
				if d := deltas[last]; len(d) < pieces || strings.Join(d, "") != answer {
					t.Errorf("the answer %q came in %d TEXT_MESSAGE_CONTENT deltas %q, want it streamed in pieces", answer, len(d), d)
				}
				if u := usageOf(obj(finished, "result", "usage")); u != used {
					t.Errorf("RUN_FINISHED usage %+v, want %+v", u, used)
				}
			})

			t.Run("destructive call approved", func(t *testing.T) {
				conv := m.newConversation()
				ap := m.addPending(conv, "create a server my-test with value 42")
				if str(ap, "tool_name") != "resources_add" || obj(ap, "tool_args")["name"] != "my-test" || obj(ap, "tool_args")["value"] != 42.0 {
					t.Fatalf("approval = %v, want resources_add name=my-test value=42", ap)
				}
				if n := m.resourceRows("my-test"); n != 0 {
					t.Fatalf("rows before approval = %d, want 0", n)
				}
				before := srv.Count()
				out := m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
				if str(out, "conversation", "status") != "active" {
					t.Errorf("status after approval = %s, want active", str(out, "conversation", "status"))
				}
				if resp := str(out, "result", "response"); !strings.Contains(resp, "my-test") {
					t.Errorf("response %q does not mention my-test", resp)
				}
				if n := m.resourceRows("my-test"); n != 1 {
					t.Errorf("rows after approval = %d, want 1", n)
				}
				recs, used := answeredSince(srv, before)
				if len(recs) != 1 {
					t.Fatalf("%d model calls after the approval, want 1 (the report)", len(recs))
				}
				checkWire(t, recs, "resources_add")
				if got := usageOf(obj(out, "result", "usage")); got != used || got.InputTokens == 0 {
					t.Errorf("result usage %+v, want %+v", got, used)
				}
				conversation := m.do(http.StatusOK, "GET", "/conversations/"+conv, nil)
				if lr := usageOf(obj(conversation, "conversation", "last_run", "usage")); lr != used {
					t.Errorf("last_run usage %+v, want %+v", lr, used)
				}
			})

			// The MCP server the toolhost started has what a program
			// needs to run, but neither the model's key nor its URL.
			if env := mcpServerEnv(t, m); strings.Contains(env, c.key()) || strings.Contains(env, c.baseEnv+"=") || !strings.Contains(env, "PATH="+binDir) {
				t.Errorf("the environment of mcp-resources holds the model's key or base URL, or not the PATH of the mesh")
			}
			m.stop()
			assertNoSecret(t, c.key(), m.logs(), m.dataDir)
			for _, r := range srv.Requests() {
				if r.Status != http.StatusOK {
					t.Errorf("the server refused a request of the mesh: %d %s %s", r.Status, r.Path, r.Error)
				}
			}
		})
	}
}

// TestLLMFailuresEndToEnd: when the provider fails past llm.max_retries
// (repeated 500s, rate limits, no answer within llm.timeout), the turn
// ends with a RUN_ERROR code in the POST answer and a notice in the
// conversation, which stays usable: once the provider recovers the next
// turn works.
func TestLLMFailuresEndToEnd(t *testing.T) {
	t.Parallel()
	cases := llmCases()
	tests := []struct {
		llmCase
		fault    llmtest.Fault
		extra    string
		wantCode string
		// wantRequests the agent makes: 1 + llm.max_retries; for a rate
		// limit, which spends no retry, one more for each wait the
		// provider asks for within llm.max_queue_wait.
		wantRequests int
	}{
		{cases[0], llmtest.Fault{Status: 500, Times: -1}, "  max_retries: 2\n", llm.CodeError, 3},
		// Retry-After 1 s (Anthropic's whole seconds): sent at 0, 1 and 2 s;
		// a third wait would reach max_queue_wait.
		{cases[2], llmtest.Fault{Status: 429, RetryAfter: 100 * time.Millisecond, Times: -1}, "  max_retries: 1\n  max_queue_wait: 3s\n", llm.CodeRateLimit, 3},
		{cases[1], llmtest.Fault{Hang: true, Times: -1}, "  timeout: 2s\n", llm.CodeTimeout, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.wantCode, func(t *testing.T) {
			m, srv := startLLMMesh(t, tt.llmCase, tt.extra)
			conv := m.newConversation()
			srv.Fail(tt.fault)
			out := m.send(conv, "list all resources")
			res := obj(out, "result")
			if str(res, "error_code") != tt.wantCode || str(res, "outcome") != "error" {
				t.Fatalf("result %v: want outcome error, error_code %s", res, tt.wantCode)
			}
			if tt.wantCode == llm.CodeRateLimit && !strings.Contains(str(res, "error"), "retry after 1s") {
				t.Errorf("error %q does not say when the provider asked to retry", str(res, "error"))
			}
			if strings.Contains(str(res, "error"), tt.key()) {
				t.Errorf("the error shows the key: %s", str(res, "error"))
			}
			if n := srv.Count(); n != tt.wantRequests {
				t.Errorf("the agent sent %d requests, want %d", n, tt.wantRequests)
			}
			events := turnEvents(t, m, conv, "RUN_ERROR")
			if last := events[len(events)-1]; str(last, "code") != tt.wantCode || str(last, "message") == "" {
				t.Errorf("RUN_ERROR %v, want code %s and a message", last, tt.wantCode)
			}
			c := obj(out, "conversation")
			if str(c, "status") != "active" {
				t.Errorf("status = %s, want active", str(c, "status"))
			}
			notice := false
			for _, msg := range messagesOf(c, "assistant") {
				if msg["notice"] == true && strings.Contains(str(msg, "content"), "LLM error") {
					notice = true
				}
			}
			if !notice {
				t.Errorf("no notice of the failure in the conversation: %v", messagesOf(c, "assistant"))
			}

			srv.Recover()
			out = m.send(conv, "list all resources")
			if code := str(out, "result", "error_code"); code != "" || !strings.Contains(str(out, "result", "response"), "resources") {
				t.Errorf("after recovery: result %v, want the listing", obj(out, "result"))
			}
			if calls := toolCalls(obj(out, "conversation")); len(calls) != 1 || str(calls[0], "name") != "resources_list" {
				t.Errorf("after recovery: tool calls %v, want one resources_list", calls)
			}
			// The failed turn's notice is not sent back to the model.
			last := srv.Requests()[srv.Count()-1].Request
			for _, msg := range last.Messages {
				if strings.Contains(msg.Content, "LLM error") {
					t.Errorf("the failure notice was sent to the model: %q", msg.Content)
				}
			}
			m.stop()
			assertNoSecret(t, tt.key(), m.logs(), m.dataDir)
		})
	}
}

// TestLLMWireRefusalsSurface: a provider refusing the mesh's requests (a
// wrong key) surfaces as LLM_ERROR naming the variable to check, and is not
// retried.
func TestLLMWireRefusalsSurface(t *testing.T) {
	t.Parallel()
	c := llmCases()[2]
	srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: "the-right-key"})
	cfg := strings.Replace(defaultConfig(t), "\n  model: offline\n", "\n  model: "+c.model+"\n", 1)
	m := startMesh(t, meshOpts{config: cfg, env: []string{c.keyEnv + "=" + c.key(), c.baseEnv + "=" + srv.BaseURL()}})
	out := m.send(m.newConversation(), "list all resources")
	res := obj(out, "result")
	if str(res, "error_code") != llm.CodeError || !strings.Contains(str(res, "error"), c.keyEnv) {
		t.Errorf("result %v: want LLM_ERROR naming %s", res, c.keyEnv)
	}
	if n := srv.Count(); n != 1 {
		t.Errorf("%d requests: an authentication failure is not retried", n)
	}
	raw, _ := json.Marshal(out)
	if strings.Contains(string(raw), c.key()) {
		t.Error("the answer shows the key")
	}
}

// TestLLMDocsModels runs every configuration of the section "Configure a
// model" of docs/models.md: each llm block in config/agent.yaml, with the
// variables its shell lines export, the provider's base URL pointed at a
// local server of its API that wants the key the lines export, completes a
// turn with a read-only tool call.
func TestLLMDocsModels(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../../docs/models.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Configure a model\n")
	if !ok {
		t.Fatal("docs/models.md has no section Configure a model")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	type snippet struct{ yaml, sh string }
	var snippets []snippet
	for _, b := range regexp.MustCompile("(?s)```(yaml|sh)\n(.*?)```").FindAllStringSubmatch(section, -1) {
		switch {
		case b[1] == "yaml":
			snippets = append(snippets, snippet{yaml: b[2]})
		case len(snippets) > 0 && snippets[len(snippets)-1].sh == "":
			snippets[len(snippets)-1].sh = b[2]
		}
	}
	providers := map[string]bool{}
	llmBlock := regexp.MustCompile(`(?m)^llm:\n(?:(?:[ \t].*)?\n)*`)
	for i, sn := range snippets {
		var file struct {
			LLM config.LLM `yaml:"llm"`
		}
		dec := yaml.NewDecoder(strings.NewReader(sn.yaml))
		dec.KnownFields(true)
		if err := dec.Decode(&file); err != nil {
			t.Fatalf("snippet %d:\n%s\ndoes not decode: %v", i, sn.yaml, err)
		}
		model, err := modelspec.ParseModel(file.LLM.Model)
		if err != nil {
			t.Fatalf("snippet %d: %v", i, err)
		}
		providers[model.Provider] = true
		t.Run(fmt.Sprintf("%d-%s", i, file.LLM.Model), func(t *testing.T) {
			env := map[string]string{}
			for _, m := range regexp.MustCompile(`(?m)^export (\w+)=(\S+)`).FindAllStringSubmatch(sn.sh, -1) {
				env[m[1]] = m[2]
			}
			api := map[string]llmtest.API{modelspec.ProviderGoogle: llmtest.Gemini, modelspec.ProviderAnthropic: llmtest.Anthropic,
				modelspec.ProviderOpenAI: llmtest.OpenAI, modelspec.ProviderOllama: llmtest.OpenAI, modelspec.ProviderCohere: llmtest.OpenAI}[model.Provider]
			keyEnv := modelspec.KeyEnv(model.Provider)
			key := env[keyEnv]
			if _, set := env[keyEnv]; !set && keyEnv != "" {
				env[keyEnv] = "" // no key: not even one from the test's environment
			}
			srv := llmtest.Start(t, llmtest.Config{API: api, APIKey: key, Model: model.Name})
			text := sn.yaml
			if file.LLM.BaseURL != "" {
				text = strings.Replace(text, file.LLM.BaseURL, srv.BaseURL(), 1)
			} else {
				env[modelspec.BaseURLEnv(model.Provider)] = srv.BaseURL()
			}
			cfg := defaultConfig(t)
			if !llmBlock.MatchString(cfg) {
				t.Fatal("config/agent.yaml has no llm block")
			}
			cfg = llmBlock.ReplaceAllLiteralString(cfg, text+"\n")
			var envList []string
			for k, v := range env {
				envList = append(envList, k+"="+v)
			}
			m := startMesh(t, meshOpts{config: cfg, env: envList})
			out := m.send(m.newConversation(), "list all resources")
			calls := toolCalls(obj(out, "conversation"))
			if str(out, "result", "error_code") != "" || len(calls) != 1 || str(calls[0], "name") != "resources_list" {
				t.Fatalf("result %v, calls %v: want resources_list called and an answer", obj(out, "result"), calls)
			}
			if n := len(srv.Answered()); n != 2 || n != srv.Count() {
				t.Errorf("%d of %d requests answered, want 2 of 2", n, srv.Count())
			}
		})
	}
	for _, p := range []string{modelspec.ProviderGoogle, modelspec.ProviderAnthropic, modelspec.ProviderOpenAI, modelspec.ProviderOllama} {
		if !providers[p] {
			t.Errorf("docs/models.md has no configuration for %s", p)
		}
	}
}

// TestLLMDocsModelNames: the names the table of docs/models.md lists pick
// the provider it says.
func TestLLMDocsModelNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"offline", modelspec.ProviderOffline},
		{"gemini-2.5-pro", modelspec.ProviderGoogle}, {"google:gemini-2.5-pro", modelspec.ProviderGoogle}, {"gemini:gemini-2.5-pro", modelspec.ProviderGoogle},
		{"claude-opus-4-1", modelspec.ProviderAnthropic}, {"anthropic:claude-opus-4-1", modelspec.ProviderAnthropic}, {"claude:claude-opus-4-1", modelspec.ProviderAnthropic},
		{"gpt-4.1", modelspec.ProviderOpenAI}, {"chatgpt-4o-latest", modelspec.ProviderOpenAI}, {"o1", modelspec.ProviderOpenAI},
		{"o3-mini", modelspec.ProviderOpenAI}, {"o4-mini", modelspec.ProviderOpenAI}, {"openai:Qwen/Qwen2.5-7B-Instruct", modelspec.ProviderOpenAI},
		{"ollama:llama3.2", modelspec.ProviderOllama},
	}
	for _, tt := range tests {
		if m, err := modelspec.ParseModel(tt.name); err != nil || m.Provider != tt.want {
			t.Errorf("ParseModel(%q) = %+v, %v; want provider %s", tt.name, m, err, tt.want)
		}
	}
}
