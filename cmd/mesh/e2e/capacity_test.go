package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// A model whose provider takes 5 requests a second, 30 users sending a
// tool turn (two calls) at once: the provider's pushback (its
// x-ratelimit headers, its 429s with Retry-After) holds the turns at the
// agent, none fails, the provider is never sent more than it takes for
// long, and a turn whose call waits for the provider shows queued in its
// conversation, not running.
func TestProviderRateLimitQueuesTurnsAndFailsNone(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 12 s load")
	}
	const users, perSecond = 30, 5
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, RateLimit: perSecond})
	m := startMesh(t, meshOpts{logLevel: "warn", config: strings.Replace(defaultConfig(t), "model: offline", "model: gpt-4o-mini", 1),
		env: []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + srv.BaseURL(), "MESH_METRICS_ADDR=127.0.0.1:0"}})
	agentMetrics := m.metricsEndpoints(t, 5)["agent"]
	if agentMetrics == "" {
		t.Fatal("no metrics endpoint for the agent")
	}
	convs := make([]string, users)
	for i := range convs {
		convs[i] = m.newConversation()
	}
	before := srv.Count()

	var mu sync.Mutex
	sentAt := map[string]time.Time{}
	answered := map[string]bool{}
	queuedLate := map[string]bool{} // seen queued 2 s or more after its message was sent
	var wg sync.WaitGroup
	for _, id := range convs {
		wg.Go(func() {
			mu.Lock()
			sentAt[id] = time.Now()
			mu.Unlock()
			status, out := m.try("POST", "/conversations/"+id+"/messages", map[string]any{"message": "list all resources"})
			mu.Lock()
			defer mu.Unlock()
			if status != 200 || str(out, "result", "outcome") != "success" || !reportsAList(str(out, "result", "response")) {
				t.Errorf("turn of %s: status %d, outcome %q, error %q", id, status, str(out, "result", "outcome"), str(out, "result", "error"))
			}
			answered[id] = true
		})
	}
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			for _, id := range convs {
				_, out := m.try("GET", "/conversations/"+id, nil)
				mu.Lock()
				if !answered[id] && str(out, "conversation", "status") == "queued" && time.Since(sentAt[id]) >= 2*time.Second {
					queuedLate[id] = true
				}
				mu.Unlock()
			}
		}
	})
	wg.Wait()
	close(stop)
	watch.Wait()

	calls := srv.Count() - before
	t.Logf("%d turns, %d model requests, %d answered 429; %d conversations seen queued while their calls waited", users, calls, srv.Limited(), len(queuedLate))
	if ok := calls - srv.Limited(); ok < 2*users {
		t.Errorf("%d model requests answered, want at least %d (two a turn)", ok, 2*users)
	}
	if len(queuedLate) == 0 {
		t.Error("no conversation showed queued while its turn waited for the provider; want the turns held at the provider to show queued")
	}
	// Every conversation is settled: nothing running, nothing queued.
	for _, id := range convs {
		if got := str(m.do(200, "GET", "/conversations/"+id, nil), "conversation", "status"); got != "active" {
			t.Errorf("conversation %s: status %s after its turn, want active", id, got)
		}
	}
	// The agent's capacity metrics count what the provider did.
	sc, _ := scrapeURL(t, agentMetrics)
	if got := sc.value("mesh_model_throttled_total", "provider=openai"); int(got) != srv.Limited() {
		t.Errorf("mesh_model_throttled_total = %v, want the %d rate-limit answers", got, srv.Limited())
	}
	if got := sc.value("mesh_model_calls_waiting", "provider=openai"); got != 0 {
		t.Errorf("mesh_model_calls_waiting = %v once every turn ended, want 0", got)
	}
}
