package bridge

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// snapshots reads a watch stream's events from an HTTP client of srv.
type snapshots struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

func watchAs(t *testing.T, url, token string) *snapshots {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/conversations?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("watch: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return &snapshots{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next is the ids of the next snapshot's conversations.
func (s *snapshots) next() []string {
	s.t.Helper()
	for s.sc.Scan() {
		data, ok := strings.CutPrefix(s.sc.Text(), "data: ")
		if !ok {
			continue
		}
		var snap struct {
			Type          string
			Conversations []struct{ ID string }
		}
		if err := json.Unmarshal([]byte(data), &snap); err != nil || snap.Type != "conversations" {
			s.t.Fatalf("snapshot %s: %v", data, err)
		}
		var ids []string
		for _, c := range snap.Conversations {
			ids = append(ids, c.ID)
		}
		return ids
	}
	s.t.Fatalf("the watch ended: %v", s.sc.Err())
	return nil
}

// A watch of the conversation list sends the caller's page at once and
// again when one of its conversations changes; a user's never shows
// another's, and asking for another's is refused before the stream opens.
func TestConversationWatchFollowsTheCallersOwn(t *testing.T) {
	b, srv := scopedBridge(t)
	if err := b.core.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.core.Stop)
	create := func(token string) string {
		w := call(b, "POST", "/conversations", token, "192.0.2.1:1000", "")
		var out struct{ Conversation struct{ ID string } }
		if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &out) != nil {
			t.Fatalf("create: %d %s", w.Code, w.Body)
		}
		return out.Conversation.ID
	}
	alice := watchAs(t, srv.URL, "alice-token-0123456789")
	root := watchAs(t, srv.URL, "root-token-0123456789")
	if got := alice.next(); len(got) != 0 {
		t.Fatalf("alice's first snapshot: %v, want none", got)
	}
	root.next()

	rootConv := create("root-token-0123456789")
	aliceConv := create("alice-token-0123456789")
	// Alice's next snapshot is woken by her own conversation only, and
	// shows it alone.
	if got := alice.next(); len(got) != 1 || got[0] != aliceConv {
		t.Errorf("alice's snapshot after her conversation: %v, want [%s] only", got, aliceConv)
	}
	// The admin sees both, eventually in one snapshot.
	deadline := time.Now().Add(10 * time.Second)
	for got := root.next(); len(got) != 2; got = root.next() {
		if time.Now().After(deadline) {
			t.Fatalf("the admin's snapshots never held both %s and %s: %v", rootConv, aliceConv, got)
		}
	}

	w := call(b, "GET", "/conversations?watch=true&owner=root", "alice-token-0123456789", "192.0.2.1:1000", "")
	if w.Code != http.StatusForbidden || strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		t.Errorf("alice watching root's: %d %s, want 403 before any stream", w.Code, w.Header().Get("Content-Type"))
	}
	w = call(b, "GET", "/conversations?watch=maybe", "alice-token-0123456789", "192.0.2.1:1000", "")
	if w.Code != http.StatusBadRequest {
		t.Errorf("watch=maybe: %d, want 400", w.Code)
	}
}
