package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The baseline the mesh's turn is measured against on the same machine
// (BenchmarkTurnCPU's server=baseline): a plain single-process agent
// server. Conversations live in memory behind one mutex and are written to
// a JSON file each on every change; the model is called over HTTP in
// OpenAI's format, its answers streamed; tools are called over MCP on the
// same sample server, over stdio. It has none of the mesh's guarantees (no
// durable events, no compare-and-set, nothing survives a crash mid-turn),
// which is the point: it is the cost of a turn with nothing else. The test
// binary runs it as a process of its own when baselineEnv names the address
// to listen on, so that its CPU is read from /proc like the mesh's, apart
// from the load generator's.
const (
	baselineEnv      = "MESH_TEST_BASELINE_ADDR"
	baselineModelEnv = "MESH_TEST_BASELINE_MODEL_URL" // the OpenAI-format base URL
	baselineDirEnv   = "MESH_TEST_BASELINE_DIR"       // the conversations' files
	baselineMCPEnv   = "MESH_TEST_BASELINE_MCP"       // the sample MCP server's binary
)

// baselineProc is the baseline server started by a benchmark.
type baselineProc struct {
	cmd  *exec.Cmd
	addr string
}

// startBaseline runs the baseline server against the OpenAI-format model
// at modelURL, and waits until it answers.
func startBaseline(t testing.TB, modelURL string) *baselineProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &baselineProc{addr: freeAddr(t)}
	p.cmd = exec.Command(self)
	p.cmd.Env = append(os.Environ(), baselineEnv+"="+p.addr, baselineModelEnv+"="+modelURL,
		baselineDirEnv+"="+dir, baselineMCPEnv+"="+filepath.Join(binDir, "mcp-resources"))
	p.cmd.Stdout, p.cmd.Stderr = os.Stderr, os.Stderr
	p.cmd.SysProcAttr = meshProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		_ = p.cmd.Wait()
	})
	meshtest.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get(p.url("/health"))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, "the baseline server does not answer on %s", p.addr)
	return p
}

func (p *baselineProc) url(path string) string { return "http://" + p.addr + path }

// checkTurn sends a turn and checks that it did what the mesh's does: one
// call of resources_list, whose result the answer reports.
func (p *baselineProc) checkTurn(t testing.TB) {
	t.Helper()
	c := turnClient(1)
	status, body, err := post(c, p.url("/conversations"), map[string]any{})
	var created struct{ Conversation struct{ ID string } }
	_ = json.Unmarshal(body, &created)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("baseline: create: %d %v %s", status, err, body)
	}
	status, body, err = post(c, p.url("/conversations/"+created.Conversation.ID+"/messages"), map[string]any{"message": "list all resources"})
	var answer struct {
		Conversation baselineConversation
		Result       struct{ Response string }
	}
	_ = json.Unmarshal(body, &answer)
	// The turn called resources_list once.
	if err != nil || status != http.StatusOK {
		t.Fatalf("baseline: send: %d %v %s", status, err, body)
	}
	if !reportsAList(answer.Result.Response) {
		t.Fatalf("baseline: response %q, want the offline planner's report of resources_list", answer.Result.Response)
	}
	msgs := answer.Conversation.Messages
	if len(msgs) != 4 {
		t.Fatalf("baseline: %d messages, want 4: %s", len(msgs), body)
	}
	if len(msgs[1].ToolCalls) != 1 {
		t.Fatalf("baseline: %d tool calls, want 1: %s", len(msgs[1].ToolCalls), body)
	}
	if name := msgs[1].ToolCalls[0].Function.Name; name != "resources_list" {
		t.Fatalf("baseline: the turn called %s, want resources_list", name)
	}
}

// usage reads the baseline's process and its MCP server's.
func (p *baselineProc) usage() map[int]procStat { return treeUsage(p.cmd.Process.Pid, "baseline") }

// baselineMessage is a message in OpenAI's chat format, which the baseline
// also stores.
type baselineMessage struct {
	Role       string             `json:"role"`
	Content    string             `json:"content"`
	ToolCalls  []baselineToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
}

type baselineToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type baselineConversation struct {
	ID        string            `json:"id"`
	Messages  []baselineMessage `json:"messages"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// baseline is the server's state.
type baseline struct {
	dir, modelURL string
	http          *http.Client
	mcp           *mcp.ClientSession
	tools         []map[string]any // the MCP server's tools in OpenAI's format, made once

	mu    sync.Mutex
	convs map[string]*baselineConversation
}

// runBaseline is the baseline server's main.
func runBaseline() int {
	ctx := context.Background()
	s := &baseline{dir: os.Getenv(baselineDirEnv), modelURL: os.Getenv(baselineModelEnv),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}, convs: map[string]*baselineConversation{}}
	cmd := exec.Command(os.Getenv(baselineMCPEnv), "--db", filepath.Join(s.dir, "resources.db"))
	session, err := mcp.NewClient(&mcp.Implementation{Name: "baseline", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		return 1
	}
	defer session.Close()
	s.mcp = session
	list, err := session.ListTools(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		return 1
	}
	for _, t := range list.Tools {
		s.tools = append(s.tools, map[string]any{"type": "function",
			"function": map[string]any{"name": t.Name, "description": t.Description, "parameters": t.InputSchema}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /conversations", s.create)
	mux.HandleFunc("POST /conversations/{id}/messages", s.message)
	l, err := net.Listen("tcp", os.Getenv(baselineEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		return 1
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	stop, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	<-stop.Done()
	_ = srv.Close()
	return 0
}

func (s *baseline) create(w http.ResponseWriter, _ *http.Request) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	now := time.Now().UTC()
	c := &baselineConversation{ID: hex.EncodeToString(id), Messages: []baselineMessage{}, CreatedAt: now, UpdatedAt: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.convs[c.ID] = c
	if err := s.save(c); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	baselineWrite(w, http.StatusCreated, map[string]any{"conversation": c})
}

// message runs a turn: the model, each tool call it asks for over MCP, and
// the model again, until it answers in text.
func (s *baseline) message(w http.ResponseWriter, r *http.Request) {
	var in struct{ Message string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Message == "" {
		http.Error(w, "a message is required", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	c, ok := s.convs[r.PathValue("id")]
	var history []baselineMessage
	if ok {
		c.Messages = append(c.Messages, baselineMessage{Role: "user", Content: in.Message})
		history = append([]baselineMessage{{Role: "system", Content: "You are a resource management agent."}}, c.Messages...)
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no such conversation", http.StatusNotFound)
		return
	}
	added, answer, err := s.turn(r.Context(), history)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Messages = append(c.Messages, added...)
	c.UpdatedAt = time.Now().UTC()
	if err := s.save(c); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	baselineWrite(w, http.StatusOK, map[string]any{"conversation": c, "result": map[string]any{"response": answer}})
}

// turn calls the model on history and the tools it asks for, and returns
// the messages added and the answer.
func (s *baseline) turn(ctx context.Context, history []baselineMessage) ([]baselineMessage, string, error) {
	n := len(history)
	for range 10 {
		m, err := s.model(ctx, history)
		if err != nil {
			return nil, "", err
		}
		history = append(history, m)
		if len(m.ToolCalls) == 0 {
			return history[n:], m.Content, nil
		}
		for _, call := range m.ToolCalls {
			args := json.RawMessage(call.Function.Arguments)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			res, err := s.mcp.CallTool(ctx, &mcp.CallToolParams{Name: call.Function.Name, Arguments: args})
			text := ""
			if err != nil {
				text = "error: " + err.Error()
			} else {
				for _, c := range res.Content {
					if t, ok := c.(*mcp.TextContent); ok {
						text += t.Text
					}
				}
			}
			history = append(history, baselineMessage{Role: "tool", Content: text, ToolCallID: call.ID})
		}
	}
	return nil, "", errors.New("the model kept asking for tools")
}

// model asks the model for its next message, streamed as the mesh's agent
// streams it: text deltas and tool calls in fragments, put together here.
func (s *baseline) model(ctx context.Context, history []baselineMessage) (baselineMessage, error) {
	body, err := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": history, "tools": s.tools, "stream": true})
	if err != nil {
		return baselineMessage{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.modelURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return baselineMessage{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := s.http.Do(req)
	if err != nil {
		return baselineMessage{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return baselineMessage{}, fmt.Errorf("model: %d %.200s", resp.StatusCode, data)
	}
	m := baselineMessage{Role: "assistant"}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			m.Content = text.String()
			return m, nil
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string
					ToolCalls []struct {
						Index    int
						ID       string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return baselineMessage{}, fmt.Errorf("model: %w", err)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
			for _, tc := range c.Delta.ToolCalls {
				for len(m.ToolCalls) <= tc.Index {
					m.ToolCalls = append(m.ToolCalls, baselineToolCall{Type: "function"})
				}
				call := &m.ToolCalls[tc.Index]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				call.Function.Name += tc.Function.Name
				call.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	return baselineMessage{}, fmt.Errorf("model: the stream ended without [DONE]: %v", sc.Err())
}

// save writes c's file whole, by a rename, as the lock holder.
func (s *baseline) save(c *baselineConversation) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	path := filepath.Join(s.dir, c.ID+".json")
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func baselineWrite(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// TestBaselineTurn keeps the benchmark's baseline honest between benchmark
// runs: a turn on it calls the tool once and answers with the conversation,
// and a message to an unknown conversation is refused.
func TestBaselineTurn(t *testing.T) {
	t.Parallel()
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI})
	p := startBaseline(t, srv.BaseURL())
	p.checkTurn(t)
	status, body, err := post(turnClient(1), p.url("/conversations/nope/messages"), map[string]any{"message": "hi"})
	if err != nil || status != http.StatusNotFound {
		t.Fatalf("a message to an unknown conversation: %d %v %s", status, err, body)
	}
}

// reportsAList reports whether answer is the offline planner's report of
// a resources_list call: the resources found, or that there are none.
func reportsAList(answer string) bool {
	return strings.Contains(answer, "There are no resources.") || strings.HasPrefix(answer, "Found ") && strings.Contains(answer, " resource")
}
