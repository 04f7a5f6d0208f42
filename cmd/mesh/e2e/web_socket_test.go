package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// socketModuleResult is what web-socket.mjs saw of /web/agui-socket.js.
type socketModuleResult struct {
	Error                 string   `json:"error"`
	Steps                 []string `json:"steps"`
	ConsoleErrors         []string `json:"consoleErrors"`
	ExpectedNetworkErrors []string `json:"expectedNetworkErrors"`
	Threads               struct {
		Dropped, Queued, After string
	} `json:"threads"`
	AfterDisconnect struct {
		State  string `json:"state"`
		Socket bool   `json:"socket"`
	} `json:"afterDisconnect"`
	Log struct {
		States   []string            `json:"states"`
		IDs      []string            `json:"ids"`
		Events   map[string][]string `json:"events"`
		Errors   []map[string]any    `json:"errors"`
		Closes   []map[string]any    `json:"closes"`
		URLCalls int                 `json:"urlCalls"`
		OffCalls int                 `json:"offCalls"`
	} `json:"log"`
}

// TestAGUISocketModuleInChromium: the page's WebSocket client module, in a
// real browser against the real binary, connects (connecting, then
// connected with the server's connection id); a socket dropped after a
// run's first frame reconnects and reattaches, so that the run's events
// arrive each once, and a run sent while it was down goes out once it is
// back; when the bridge process dies it reconnects, with backoff, to the
// bridge `mesh up` starts again; a handler taken off is not called; and
// disconnect ends in disconnected without a reconnect.
func TestAGUISocketModuleInChromium(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	m := startMesh(t, meshOpts{logLevel: "info"})
	var res socketModuleResult
	runPeer(t, node, "web-socket.mjs", 3*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + artifactDir(t), "TIMEOUT_MS=20000",
	}, &res, map[string]func(){
		"kill-bridge": func() {
			if err := killPID(m.childPID("bridge")); err != nil {
				t.Fatalf("kill the bridge: %v", err)
			}
		},
	})
	if res.Error != "" {
		t.Fatalf("the module did not do what a client expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	lg := res.Log

	// States: connecting, connected; reconnecting, connected after the
	// drop and again after the bridge died (once or more: backoff);
	// disconnected at the end.
	var compact []string
	for _, s := range lg.States {
		if len(compact) == 0 || compact[len(compact)-1] != s {
			compact = append(compact, s)
		}
	}
	want := []string{"connecting", "connected", "reconnecting", "connected", "reconnecting", "connected", "disconnected"}
	if !slices.Equal(compact, want) {
		t.Errorf("states %v, want %v", lg.States, want)
	}
	if res.AfterDisconnect.State != "disconnected" || !res.AfterDisconnect.Socket {
		t.Errorf("after disconnect: %+v, want disconnected without a socket", res.AfterDisconnect)
	}
	// A connection id per socket, each the server's.
	seen := map[string]bool{}
	for _, id := range lg.IDs {
		if uuid.Validate(id) != nil || seen[id] {
			t.Errorf("connection ids %v: want a distinct UUID per socket", lg.IDs)
			break
		}
		seen[id] = true
	}
	if len(lg.IDs) != 3 {
		t.Errorf("%d connection_open frames, want 3 (the first socket, after the drop, after the bridge died)", len(lg.IDs))
	}
	// The URL function is asked for every attempt: at least one for each
	// socket that opened.
	if lg.URLCalls < 3 {
		t.Errorf("url called %d times, want once per attempt (3 or more)", lg.URLCalls)
	}
	if lg.OffCalls != 0 {
		t.Errorf("a handler taken off with off() was called %d times", lg.OffCalls)
	}
	// The bridge that stopped said so before its socket closed... when it
	// could: a killed process says nothing. The page's drop is 4000.
	if len(lg.Closes) < 2 || lg.Closes[0]["code"] != 4000.0 {
		t.Errorf("closes %v, want the page's drop (4000) first, then the dead bridge's", lg.Closes)
	}

	// Every run's events, each once, to its end.
	for name, thread := range map[string]string{"dropped": res.Threads.Dropped, "queued": res.Threads.Queued, "after": res.Threads.After} {
		evs := lg.Events[thread]
		count := map[string]int{}
		for _, e := range evs {
			count[e]++
		}
		if count["RUN_STARTED"] != 1 || count["RUN_FINISHED"] != 1 || count["TOOL_CALL_START"] != 1 || count["TOOL_CALL_RESULT"] != 1 {
			t.Errorf("%s run's events %v: want RUN_STARTED, one tool call with its result and RUN_FINISHED, each once", name, evs)
		}
		if len(evs) == 0 || evs[0] != "RUN_STARTED" || evs[len(evs)-1] != "RUN_FINISHED" {
			t.Errorf("%s run's events %v: want them from RUN_STARTED to RUN_FINISHED", name, evs)
		}
	}
	if len(lg.Errors) > 0 {
		t.Errorf("error events: %v", lg.Errors)
	}
}
