package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// TestHugeConversationKeepsAnswering: a conversation given 20 messages of
// 900 KB each answers every turn (about 18 MB of messages: more than a KV
// value holds); the model gets a history within sessions.max_bytes (4 MiB)
// that ends with the message just sent; the agent's memory stays bounded;
// GET pages back through every message once, in order; and a reply carries
// a page, not the whole history.
func TestHugeConversationKeepsAnswering(t *testing.T) {
	c := llmCases()[0] // the OpenAI-format fake, answered by the offline planner
	if c.api != llmtest.OpenAI {
		t.Fatal("llmCases()[0] is not the OpenAI case")
	}
	m, srv := startLLMMesh(t, c, "")
	agent := m.childPID("agent")
	conv := str(m.do(http.StatusCreated, "POST", "/conversations", map[string]any{}), "conversation", "id")

	const turns, size = 20, 900_000
	const budget = 4 << 20 // sessions.max_bytes' default
	var peak, firstHalf float64
	for i := range turns {
		text := fmt.Sprintf("turn %02d ", i) + strings.Repeat(string(rune('a'+i%26)), size)
		n := srv.Count()
		start := time.Now()
		out := m.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": text})
		if res := obj(out, "result"); res["outcome"] != "success" || str(res, "response") == "" {
			t.Fatalf("turn %d: result %v", i, res)
		}
		// The reply carries a page: its size stays near the history's
		// budget whatever the conversation's length.
		page := list(out, "conversation", "messages")
		data, _ := json.Marshal(page)
		if len(data) > budget+size || len(page) > store.DefaultPageSize {
			t.Fatalf("turn %d: the reply carries %d messages, %d bytes", i, len(page), len(data))
		}
		// Every model request of the turn fits, and its history ends with
		// the message just sent.
		for _, r := range srv.Requests()[n:] {
			if len(r.Body) > budget+2*size {
				t.Fatalf("turn %d: a model request of %d bytes", i, len(r.Body))
			}
			if !strings.Contains(string(r.Body), fmt.Sprintf("turn %02d ", i)) {
				t.Fatalf("turn %d: the model request lacks the message sent", i)
			}
		}
		rss := rssMiB(agent)
		peak = max(peak, rss)
		if i < turns/2 {
			firstHalf = peak
		}
		t.Logf("turn %d: %v, agent RSS %.0f MiB", i, time.Since(start).Round(time.Millisecond), rss)
	}
	// Bounded: the agent holds the history of one turn at a time (4 MiB,
	// decoded and encoded a few times), not the 18 MB conversation: its RSS
	// levels off once the history fills the budget (turn 5 or so), and the
	// second half of the turns, 9 MB more of conversation, adds no more
	// than noise. The absolute cap is loose: the race detector multiplies a
	// heap, the more so on a loaded machine.
	if peak > 1.25*firstHalf || peak > 400 {
		t.Errorf("agent RSS peaked at %.0f MiB, %.0f MiB in the first %d turns: it grows with the conversation", peak, firstHalf, turns/2)
	}

	// Paging: back from the newest, 7 messages a page, every message once.
	head := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv+"?messages=1", nil), "conversation")
	total := int(head["message_count"].(float64))
	if total < 2*turns {
		t.Fatalf("message_count %d, want %d at least", total, 2*turns)
	}
	var ids, users []string // users: the turns of the user messages, in order
	seen := map[string]bool{}
	before := ""
	for pages := 0; ; pages++ {
		if pages > total {
			t.Fatal("paging does not end")
		}
		path := "/conversations/" + conv + "?messages=7"
		if before != "" {
			path += "&before=" + before
		}
		cv := obj(m.do(http.StatusOK, "GET", path, nil), "conversation")
		var page, pageUsers []string
		for _, x := range list(cv, "messages") {
			id := str(x, "id")
			if seen[id] {
				t.Fatalf("message %s on two pages", id)
			}
			seen[id] = true
			page = append(page, id)
			if str(x, "role") == "user" {
				pageUsers = append(pageUsers, str(x, "content")[:8])
			}
		}
		if len(page) == 0 || len(page) > 7 {
			t.Fatalf("a page of %d messages", len(page))
		}
		ids, users = append(page, ids...), append(pageUsers, users...)
		before, _ = cv["messages_before"].(string)
		if before == "" {
			break
		}
	}
	if len(ids) != total {
		t.Fatalf("pages gave %d messages, message_count says %d", len(ids), total)
	}
	if len(users) != turns {
		t.Fatalf("the pages hold %d user messages, want %d", len(users), turns)
	}
	for i, u := range users {
		if u != fmt.Sprintf("turn %02d ", i) {
			t.Fatalf("user message %d starts %q", i, u)
		}
	}
	if status, out := m.try("GET", "/conversations/"+conv+"?messages=0", nil); status != http.StatusBadRequest {
		t.Errorf("messages=0: %d %v", status, out)
	}
	if status, out := m.try("GET", "/conversations/"+conv+"?before=nope", nil); status != http.StatusBadRequest {
		t.Errorf("before=nope: %d %v", status, out)
	}
}
