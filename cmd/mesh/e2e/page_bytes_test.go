package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A conversation of 900 KB messages answers each one, and its GET, with
// under 1.5 MB: a page of messages is bounded by bytes as well as by
// count, and messages_before leads to the rest, every message once.
func TestLargeMessagesKeepEveryAnswerSmall(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{logLevel: "info"})
	conv := m.newConversation()
	const limit = 1500 << 10
	big := strings.Repeat("resource ", 900<<10/9)
	post := func(method, path string, body any) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			data, _ := json.Marshal(body)
			rd = bytes.NewReader(data)
		}
		req, _ := http.NewRequest(method, m.url(path), rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %.300s", method, path, resp.StatusCode, data)
		}
		return data
	}
	for i := range 4 {
		if n := len(post("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list " + big})); n > limit {
			t.Errorf("answer to message %d: %d bytes, want under %d", i+1, n, limit)
		}
	}
	seen := map[string]bool{}
	users := 0
	for path := "/conversations/" + conv; path != ""; {
		data := post("GET", path, nil)
		if len(data) > limit {
			t.Errorf("GET %s: %d bytes, want under %d", path, len(data), limit)
		}
		var out map[string]any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		for _, msg := range list(out, "conversation", "messages") {
			id := str(msg, "id")
			if seen[id] {
				t.Errorf("message %s came twice", id)
			}
			seen[id] = true
			if str(msg, "role") == "user" {
				users++
			}
		}
		path = ""
		if before := str(out, "conversation", "messages_before"); before != "" {
			path = "/conversations/" + conv + "?before=" + url.QueryEscape(before)
		}
	}
	if users != 4 {
		t.Errorf("walking the pages found %d user messages, want 4", users)
	}
}
