package bridge

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// moderationFake speaks OpenAI's /v1/moderations: it flags an input that
// says "forbidden-word" (harassment), and answers 500 while down is set.
type moderationFake struct {
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	auth []string
	seen []string
}

func newModerationFake(t *testing.T) *moderationFake {
	f := &moderationFake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Model, Input string }
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &in)
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.seen = append(f.seen, in.Model+": "+in.Input)
		f.mu.Unlock()
		if f.down.Load() {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusInternalServerError)
			return
		}
		bad := strings.Contains(in.Input, "forbidden-word")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "modr-1", "model": in.Model, "results": []any{map[string]any{
			"flagged": bad, "categories": map[string]bool{"harassment": bad, "violence": false},
		}}})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// screenedBridge is a bridge of a mesh without agents whose safety section
// is safety (YAML, indented two spaces), with OPENAI_API_KEY set.
func screenedBridge(t *testing.T, safety string) *Role {
	t.Helper()
	m := meshtest.New(t)
	yaml := "name: screened\nllm:\n  model: offline\nhttp:\n  wait_timeout: 1s\nsafety:\n" + safety
	cfg, err := config.Parse("agent.yaml", []byte(yaml), func(k string) string {
		if k == "OPENAI_API_KEY" {
			return "mod-key-0123"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.auth.Close)
	return b
}

// A message that a block pattern matches, or that the moderation service
// flags, is refused with 422 content_blocked naming the rule or category,
// and is not stored; a clean one is queued. When the service fails, the
// message is refused with 503 moderation_unavailable, or let through with
// fail_open.
func TestSafetyScreensMessagesBeforeTheyAreQueued(t *testing.T) {
	t.Parallel()
	fake := newModerationFake(t)
	b := screenedBridge(t, "  block_patterns: ['(?i)secret[- ]plan']\n  moderation:\n    api: openai\n    url: "+fake.srv.URL+"/v1/moderations\n")
	id := newConversation(t, b, "")
	send := func(text string) *httptest.ResponseRecorder {
		body, _ := json.Marshal(map[string]string{"message": text})
		return call(b, "POST", "/conversations/"+id+"/messages", "", "192.0.2.1:1", string(body))
	}
	refused := func(name string, w *httptest.ResponseRecorder, status int, code, says string) {
		t.Helper()
		var out struct{ Code, Error string }
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		if w.Code != status || out.Code != code || !strings.Contains(out.Error, says) {
			t.Errorf("%s: %d %s, want %d %s saying %q", name, w.Code, w.Body, status, code, says)
		}
	}
	refused("a block pattern", send("here is the Secret Plan"), http.StatusUnprocessableEntity, "content_blocked", "block pattern 0")
	refused("a flagged message", send("you forbidden-word"), http.StatusUnprocessableEntity, "content_blocked", "harassment")
	fake.down.Store(true)
	refused("the service down", send("hello while it is down"), http.StatusServiceUnavailable, "moderation_unavailable", "again later")
	fake.down.Store(false)
	if w := send("hello there"); w.Code != http.StatusAccepted && w.Code != http.StatusOK {
		t.Errorf("a clean message: %d %s, want it queued", w.Code, w.Body)
	}

	// Only the clean message was stored.
	w := call(b, "GET", "/conversations/"+id, "", "192.0.2.1:1", "")
	for _, gone := range []string{"Secret Plan", "forbidden-word", "while it is down"} {
		if strings.Contains(w.Body.String(), gone) {
			t.Errorf("the conversation holds the refused %q: %s", gone, w.Body)
		}
	}
	if !strings.Contains(w.Body.String(), "hello there") {
		t.Errorf("the conversation lacks the clean message: %s", w.Body)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for i, a := range fake.auth {
		if a != "Bearer mod-key-0123" {
			t.Errorf("moderation request %d: Authorization %q, want the key of OPENAI_API_KEY", i, a)
		}
	}
	for _, s := range fake.seen {
		if strings.Contains(s, "Secret Plan") {
			t.Errorf("a message a block pattern refused was sent to the service: %q", s)
		}
		if !strings.HasPrefix(s, config.DefaultModerationModel+": ") {
			t.Errorf("moderation request %q, want model %s", s, config.DefaultModerationModel)
		}
	}
}

func TestSafetyFailOpenLetsMessagesThroughWhenTheServiceFails(t *testing.T) {
	t.Parallel()
	fake := newModerationFake(t)
	fake.down.Store(true)
	b := screenedBridge(t, "  moderation:\n    api: openai\n    url: "+fake.srv.URL+"\n    fail_open: true\n")
	id := newConversation(t, b, "")
	if w := call(b, "POST", "/conversations/"+id+"/messages", "", "192.0.2.1:1", `{"message":"hello"}`); w.Code != http.StatusAccepted && w.Code != http.StatusOK {
		t.Errorf("with fail_open and the service down: %d %s, want the message queued", w.Code, w.Body)
	}
}

func TestSafetyReadsBothModerationAnswers(t *testing.T) {
	t.Parallel()
	got, err := azureFlagged([]byte(`{"blocklistsMatch":[{"blocklistName":"words","blocklistItemText":"x"}],"categoriesAnalysis":[{"category":"Hate","severity":2},{"category":"Violence","severity":4},{"category":"Sexual","severity":0}]}`), 4)
	if err != nil || strings.Join(got, ",") != "Violence,blocklist words" {
		t.Errorf("azure answer: %v %v, want Violence and the blocklist", got, err)
	}
	if got, err := azureFlagged([]byte(`{"categoriesAnalysis":[{"category":"Hate","severity":2}]}`), 4); err != nil || len(got) != 0 {
		t.Errorf("azure answer under the severity: %v %v, want nothing flagged", got, err)
	}
	if got, err := openAIFlagged([]byte(`{"results":[{"flagged":true,"categories":{}}]}`)); err != nil || strings.Join(got, ",") != "flagged" {
		t.Errorf("openai answer flagged without a category: %v %v", got, err)
	}
	for _, bad := range []string{`{}`, `not json`, `{"results":null}`} {
		if _, err := openAIFlagged([]byte(bad)); err == nil {
			t.Errorf("openai answer %s: no error", bad)
		}
		if _, err := azureFlagged([]byte(bad), 4); err == nil {
			t.Errorf("azure answer %s: no error", bad)
		}
	}
}

// A moderation service whose key is not set stops the bridge at start.
func TestSafetyModerationWithoutItsKeyRefusesToStart(t *testing.T) {
	t.Parallel()
	m := meshtest.New(t)
	cfg, err := config.Parse("agent.yaml", []byte("name: screened\nllm:\n  model: offline\nsafety:\n  moderation:\n    api: azure\n    url: https://example.cognitiveservices.azure.com/contentsafety/text:analyze?api-version=2024-09-01\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: cfg})
	if err == nil || !strings.Contains(err.Error(), "AZURE_CONTENT_SAFETY_KEY") {
		t.Errorf("a bridge without the moderation key: %v, want an error naming AZURE_CONTENT_SAFETY_KEY", err)
	}
}
