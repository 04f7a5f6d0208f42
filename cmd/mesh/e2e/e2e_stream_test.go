package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// sseEvent is one event of an SSE stream.
type sseEvent struct {
	id, data string
}

// sseReader reads an SSE response.
type sseReader struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func openSSE(t *testing.T, ctx context.Context, url, lastEventID string) *sseReader {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for k, want := range map[string]string{"Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	return &sseReader{resp: resp, sc: sc}
}

// next returns the next event, skipping comments.
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
	if err := r.sc.Err(); err != nil {
		return ev, err
	}
	return ev, fmt.Errorf("stream ended")
}

func (r *sseReader) close() { _ = r.resp.Body.Close() }

func eventType(data string) string {
	var ev struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(data), &ev)
	return ev.Type
}

// readUntil reads events until one of type typ (included).
func readUntil(t *testing.T, r *sseReader, typ string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("reading until %s: %v (after %d events)", typ, err, len(out))
		}
		out = append(out, ev)
		if eventType(ev.data) == typ {
			return out
		}
	}
}

func TestEventsResumeWithLastEventIDEqualsOneRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gateConfig(dir)})
	conv := m.newConversation()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	url := m.url("/conversations/" + conv + "/events")

	// A first turn, so the replay has history before the live part.
	openGate(t, dir)
	m.send(conv, "list items")
	if err := os.Remove(filepath.Join(dir, "gate")); err != nil {
		t.Fatal(err)
	}

	whole := openSSE(t, ctx, url, "")
	defer whole.close()
	part := openSSE(t, ctx, url, "")

	// A second turn blocks in its tool call: the reader drops mid-turn.
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list items"})
	}()
	before := readUntil(t, part, "RUN_FINISHED") // the first turn, replayed
	first := readUntil(t, part, "TOOL_CALL_END")
	part.close()
	before = append(before, first...)
	last := first[len(first)-1].id
	meshtest.Eventually(t, 10*time.Second, func() bool { return last != "" }, "events have no ids")

	openGate(t, dir)
	<-answered
	resumed := openSSE(t, ctx, url, last)
	defer resumed.close()
	after := readUntil(t, resumed, "RUN_FINISHED")

	all := readUntil(t, whole, "RUN_FINISHED") // first turn
	all = append(all, readUntil(t, whole, "RUN_FINISHED")...)
	// Opened inside the run, the stream starts that run first (no id).
	if len(after) == 0 || after[0].id != "" || !strings.Contains(after[0].data, `"type":"RUN_STARTED"`) || !strings.Contains(after[0].data, `"mesh":"resumed"`) {
		t.Errorf("the resumed read starts %+v, want the run's RUN_STARTED written for it", after[:min(1, len(after))])
	}
	got := withIDs(append(before, after...))
	want := withIDs(all)
	if len(got) != len(want) {
		t.Fatalf("resumed read has %d events, uninterrupted %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d differs:\n resumed %+v\n    whole %+v", i, got[i], want[i])
		}
	}
}

// withIDs keeps the stored events of a read, those with an id (the bridge
// writes the starts and ends of runs it needs without one).
func withIDs(evs []sseEvent) []sseEvent {
	var out []sseEvent
	for _, e := range evs {
		if e.id != "" {
			out = append(out, e)
		}
	}
	return out
}
