package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMessageTextStaysOutOfLogs sends messages that carry personal data (an
// e-mail address, a phone number) through REST and both dialects, at the
// debug log level: the mesh logs ids, never what people wrote, so none of
// it reaches the log. The conversation itself keeps it.
func TestMessageTextStaysOutOfLogs(t *testing.T) {
	t.Parallel()
	const email, phone = "jane.doe.pii7f3a@example.com", "+1-555-0100-7f3a"
	m := startMesh(t, meshOpts{logLevel: "debug"})
	message := "list all resources for " + email + ", call me at " + phone
	conv, _ := m.firstTurn(message)
	for _, req := range []struct {
		path string
		body map[string]any
	}{
		{"/api/chat", map[string]any{"message": message}},
		{"/api/conversation", map[string]any{"message": message}},
	} {
		if status, body := m.stream("POST", req.path, req.body); status != http.StatusOK {
			t.Fatalf("POST %s: %d %s", req.path, status, body)
		}
	}
	time.Sleep(time.Second) // the last saves and heartbeats
	kept := false
	for _, msg := range list(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation", "messages") {
		kept = kept || strings.Contains(str(msg, "content"), email)
	}
	if !kept {
		t.Errorf("the conversation does not keep the message")
	}
	logs := m.logs()
	for what, s := range map[string]string{"the e-mail address": email, "the phone number": phone, "the message": "call me at"} {
		if strings.Contains(logs, s) {
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, s) {
					t.Errorf("%s is in the mesh's log: %s", what, line)
					break
				}
			}
		}
	}
}
