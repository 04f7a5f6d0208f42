package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// slowRestarts makes `mesh up` and the toolhost wait before restarting what
// died (at least 5 s, past the 2 s a call waits for a toolhost), so that a
// test can act during the outage.
func slowRestarts(t *testing.T) string {
	return defaultConfig(t) + "\nmesh:\n  restart_backoff: 10s\n"
}

// waitToolsGone waits until the mesh has noticed that no toolhost serves
// tools: the outage has begun.
func (m *meshProc) waitToolsGone() {
	m.t.Helper()
	meshtest.Eventually(m.t, 10*time.Second, func() bool {
		_, body := m.try("GET", "/ready", nil)
		return str(body, "checks", "toolhosts") == "none running"
	}, "the mesh still sees a toolhost")
}

// lastToolResult is the newest tool message of an answer's conversation.
func lastToolResult(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	tools := messagesOf(obj(out, "conversation"), "tool")
	if len(tools) == 0 {
		t.Fatalf("no tool result in %v", out)
	}
	return tools[len(tools)-1]
}

func TestToolhostKilledGivesClearErrorThenRecovers(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: slowRestarts(t)})
	conv, _ := m.firstTurn("list all resources")

	if err := killPID(m.childPID("toolhost")); err != nil {
		t.Fatal(err)
	}
	m.waitToolsGone()
	out := m.send(conv, "list all resources")
	res := lastToolResult(t, out)
	if res["is_error"] != true || !strings.Contains(str(res, "content"), "unavailable") {
		t.Fatalf("tool result during the outage = %v, want a clear 'unavailable' error", res)
	}
	if str(out, "conversation", "status") != "active" {
		t.Errorf("status = %s, want active: the conversation must stay usable", str(out, "conversation", "status"))
	}
	meshtest.Eventually(t, 60*time.Second, func() bool {
		out := m.send(conv, "list all resources")
		return lastToolResult(t, out)["is_error"] != true
	}, "tool calls still fail after the toolhost restart")
}

func TestMCPServerKilledGivesClearErrorThenRecovers(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: slowRestarts(t)})
	conv, _ := m.firstTurn("list all resources")

	toolhost := m.childPID("toolhost")
	var server int
	for _, p := range descendants(toolhost) {
		if args := cmdline(p); len(args) > 0 && filepath.Base(args[0]) == "mcp-resources" {
			server = p
		}
	}
	if server == 0 {
		t.Fatal("no mcp-resources process under the toolhost")
	}
	if err := killPID(server); err != nil {
		t.Fatal(err)
	}
	m.waitToolsGone()
	out := m.send(conv, "list all resources")
	res := lastToolResult(t, out)
	if res["is_error"] != true || !strings.Contains(str(res, "content"), "resources") {
		t.Fatalf("tool result with the MCP server dead = %v, want a clear error naming the server", res)
	}
	meshtest.Eventually(t, 60*time.Second, func() bool {
		out := m.send(conv, "list all resources")
		return lastToolResult(t, out)["is_error"] != true
	}, "tool calls still fail after the MCP server restart")
	if m.childPID("toolhost") != toolhost {
		t.Errorf("the toolhost restarted; only its MCP server should have")
	}
}

func TestPlainNATSClientSeesTurnEventsInOrder(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	// Plain, as the nats CLI is: with the admin identity mesh up made.
	nc := m.adminNATS(t)
	events := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe("mesh.evt.>", events)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	conv, _ := m.firstTurn("list all resources")

	var types []string
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case msg := <-events:
			var ev struct {
				Type     string `json:"type"`
				Name     string `json:"name"`
				ThreadID string `json:"threadId"`
			}
			if err := json.Unmarshal(msg.Data, &ev); err != nil {
				t.Fatalf("event %s is not JSON: %v", msg.Subject, err)
			}
			if want := "mesh.evt." + conv + "." + ev.Type; msg.Subject != want {
				t.Errorf("subject %s, want %s", msg.Subject, want)
			}
			// One CONTENT stands for all the chunks of a message.
			switch {
			case ev.Type == "CUSTOM":
				types = append(types, ev.Type+":"+ev.Name)
			case ev.Type != "TEXT_MESSAGE_CONTENT" || len(types) == 0 || types[len(types)-1] != "TEXT_MESSAGE_CONTENT":
				types = append(types, ev.Type)
			}
			done = ev.Type == "RUN_FINISHED"
		case <-deadline:
			t.Fatalf("no RUN_FINISHED; saw %v", types)
		}
	}
	// The bridge's run_queued comes before the agent's RUN_STARTED.
	want := "CUSTOM:run_queued RUN_STARTED STATE_SNAPSHOT TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

// runMeshOnce runs `mesh up` expecting it to fail at startup.
func runMeshOnce(t *testing.T, config string, env ...string) (exitCode int, output string, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "up")
	cmd.Env = append(os.Environ(), "MESH_CONFIG="+path, "MESH_DATA_DIR="+filepath.Join(dir, "data"),
		"MESH_HTTP_ADDR="+freeAddr(t), "MESH_NATS_ADDR="+freeAddr(t), "NATS_URL=",
		"GEMINI_API_KEY=", "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=")
	cmd.Env = append(cmd.Env, env...)
	outPath := filepath.Join(dir, "output")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = meshProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		data, _ := os.ReadFile(outPath)
		t.Fatalf("mesh up did not exit; output:\n%s", data)
	}
	data, _ := os.ReadFile(outPath)
	return cmd.ProcessState.ExitCode(), string(data), filepath.Join(dir, "data")
}

func TestStartupRefusesBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		want   []string
	}{
		// Without llm.model the agent runs gemini-2.5-flash, which needs its key.
		{"no llm.model and no key", "name: a\nllm: {}\n", []string{"llm.model", "gemini-2.5-flash", "GEMINI_API_KEY"}},
		{"cloud model without key", "name: a\nllm:\n  model: claude-sonnet-4-5\n", []string{"llm.model", "ANTHROPIC_API_KEY"}},
		{"gemini model without key", "name: a\nllm:\n  model: gemini-2.5-flash\n", []string{"GEMINI_API_KEY"}},
		{"unknown field", "name: a\nllm:\n  model: offline\n  modle: x\n", []string{"modle"}},
		{"bad MCP server", "name: a\nllm:\n  model: offline\nmcp_servers:\n  - name: x\n", []string{"mcp_servers[0]", "command", "url"}},
		// Bad agent trees: each error names the node.
		{"tree: unknown node type", tree("    - {name: scout, type: swarm}\n"), []string{"agent.agents[0].type", `"scout"`, "swarm"}},
		{"tree: composite without children", tree("    - {name: fan, type: parallel}\n"), []string{"agent.agents[0].agents", `"fan"`, "children"}},
		{"tree: placeholder without producer", tree("    - {name: exec, type: llm, prompt: \"Do {plan}\"}\n"), []string{"agent.agents[0].prompt", `"exec"`, "{plan}"}},
		{"tree: cycle by name", tree("    - name: again\n      type: loop\n      agents:\n        - {ref: root}\n"), []string{"agent.agents[0].agents[0].ref", `"again"`, `"root"`, "cycle"}},
		{"tree: node model without key", tree("    - {name: smart, type: llm, model: gpt-4o}\n"), []string{"agent.agents[0].model", "OPENAI_API_KEY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := runMeshOnce(t, tt.config)
			if code == 0 {
				t.Fatalf("exit code 0; output:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not name %q:\n%s", w, out)
				}
			}
			if !strings.Contains(out, "agent.yaml") {
				t.Errorf("output does not name the file:\n%s", out)
			}
		})
	}
}

// tree is an agent.yaml whose tree is a sequential node "root" with the
// children given.
func tree(children string) string {
	return "name: a\nllm:\n  model: offline\nagent:\n  name: root\n  type: sequential\n  agents:\n" + children
}

func TestAPIKeysNeverLogged(t *testing.T) {
	t.Parallel()
	const secret = "AIzaSy-TEST-SECRET-0123456789"
	// A key present in the environment of a working mesh.
	m := startMesh(t, meshOpts{env: []string{"GEMINI_API_KEY=" + secret, "ANTHROPIC_API_KEY=" + secret + "-a"}})
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource secretive with value 1")
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
	m.send(conv, "list all resources")
	m.stop()
	assertNoSecret(t, secret, m.logs(), m.dataDir)

	// The key of the model in use, through a failing call to its API.
	down := freeAddr(t) // nothing listens there
	m = startMesh(t, meshOpts{
		config: "name: a\nllm:\n  model: gemini-2.5-flash\n  max_retries: -1\n  timeout: 2s\n",
		env:    []string{"GEMINI_API_KEY=" + secret, "GEMINI_BASE_URL=http://" + down},
	})
	out := m.send(m.newConversation(), "hello")
	if code := str(out, "result", "error_code"); code != "LLM_ERROR" {
		t.Errorf("error code = %q, want LLM_ERROR (%v)", code, obj(out, "result"))
	}
	m.stop()
	assertNoSecret(t, secret, m.logs(), m.dataDir)
}

func assertNoSecret(t *testing.T, secret, logs, dataDir string) {
	t.Helper()
	if strings.Contains(logs, secret) {
		t.Errorf("the API key appears in the logs")
	}
	_ = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err == nil && bytes.Contains(data, []byte(secret)) {
			t.Errorf("the API key appears in %s", path)
		}
		return nil
	})
}
