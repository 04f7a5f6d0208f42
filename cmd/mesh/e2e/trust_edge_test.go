package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// edgeConfig is the default configuration with short timeouts, a host
// name and a CORS origin, for the tests of the HTTP edge.
func edgeConfig(t testing.TB) string {
	return defaultConfig(t) + `
http:
  read_timeout: 2s
  idle_timeout: 2s
  hosts: [agents.example]
  cors:
    origins: ["https://app.example"]
`
}

// TestHTTPEdge drives the bridge's edge as a foreign client would, with
// raw connections and curl: slow bodies and idle keep-alives are cut off
// by the timeouts of http config, a state-changing request that is not
// JSON is refused (415), a Host that names no name of the bridge is
// refused (421, DNS rebinding), and CORS answers only the configured
// origin.
func TestHTTPEdge(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: edgeConfig(t), logLevel: "info"})
	t.Run("slow bodies", func(t *testing.T) { testSlowBodies(t, m, 200) })
	t.Run("idle keep-alives", func(t *testing.T) { testIdleKeepAlives(t, m, 50) })
	t.Run("content type", func(t *testing.T) { testContentType(t, m) })
	t.Run("empty bodies", func(t *testing.T) { testEmptyBodies(t, m) })
	t.Run("host", func(t *testing.T) { testHost(t, m) })
	t.Run("cors", func(t *testing.T) { testCORS(t, m) })
	t.Run("reused run id", func(t *testing.T) { testReusedRunID(t, m) })
	if status, _ := m.try("GET", "/ready", nil); status != http.StatusOK {
		t.Errorf("the mesh is not ready after the edge tests: %d", status)
	}
}

// closedWithin opens n connections, has each send what send writes, and
// reports how many the server closed within d.
func closedWithin(t *testing.T, addr string, n int, d time.Duration, send func(c net.Conn, r *bufio.Reader) error) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	closed := 0
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := bufio.NewReader(c)
			if err := send(c, r); err != nil {
				t.Errorf("send: %v", err)
				return
			}
			// Read whatever the server answers until it closes; a read that
			// times out means the connection is still open.
			_ = c.SetReadDeadline(time.Now().Add(d))
			_, err := io.Copy(io.Discard, r)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return
			}
			mu.Lock()
			closed++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return closed
}

// testSlowBodies: n connections send headers and the first byte of a
// body, then nothing: the read timeout (2s) closes every one.
func testSlowBodies(t *testing.T, m *meshProc, n int) {
	start := time.Now()
	closed := closedWithin(t, m.httpAddr, n, 12*time.Second, func(c net.Conn, _ *bufio.Reader) error {
		_, err := fmt.Fprintf(c, "POST /conversations HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", m.httpAddr)
		return err
	})
	t.Logf("%d of %d slow-body connections closed in %s", closed, n, time.Since(start).Round(time.Millisecond))
	if closed != n {
		t.Errorf("%d of %d slow-body connections still open after 12s (read_timeout 2s)", n-closed, n)
	}
}

// testIdleKeepAlives: n connections make one request each, read the
// answer, and keep the connection: the idle timeout (2s) closes every one.
func testIdleKeepAlives(t *testing.T, m *meshProc, n int) {
	closed := closedWithin(t, m.httpAddr, n, 12*time.Second, func(c net.Conn, r *bufio.Reader) error {
		if _, err := fmt.Fprintf(c, "GET /web/icon.svg HTTP/1.1\r\nHost: %s\r\n\r\n", m.httpAddr); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.Close {
			return fmt.Errorf("the server closed the connection after the answer (%d), not after idling", resp.StatusCode)
		}
		return nil
	})
	if closed != n {
		t.Errorf("%d of %d idle keep-alive connections still open after 12s (idle_timeout 2s)", n-closed, n)
	}
}

// curl runs curl with args and returns the status, the headers and the
// body of the answer.
func curl(t *testing.T, args ...string) (int, http.Header, string) {
	t.Helper()
	hdrFile := filepath.Join(t.TempDir(), "headers")
	body, err := exec.Command("curl", append([]string{"-s", "--max-time", "20", "-D", hdrFile}, args...)...).Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	raw, err := os.ReadFile(hdrFile)
	if err != nil {
		t.Fatal(err)
	}
	// Headers only: the body curl wrote apart is not chunked any more.
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(raw))), nil)
	if err != nil {
		t.Fatalf("curl %v: %v: %q", args, err, raw)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header, string(body)
}

func (m *meshProc) conversationCount(t *testing.T) int {
	_, out := m.try("GET", "/conversations", nil)
	n, _ := obj(out, "summary")["total"].(float64)
	return int(n)
}

// testContentType: a state-changing request whose body is not JSON (a
// cross-site form posts text/plain or a form encoding) is refused with
// 415 and creates nothing; JSON is taken.
func testContentType(t *testing.T, m *meshProc) {
	before := m.conversationCount(t)
	for _, args := range [][]string{
		{"-H", "Content-Type: text/plain", "--data", `{"message":"list all resources"}`},
		{"--data", `{"message":"list all resources"}`}, // curl's default: application/x-www-form-urlencoded
		{"-F", "message=list all resources"},
	} {
		status, _, body := curl(t, append(args, m.url("/conversations"))...)
		if status != http.StatusUnsupportedMediaType || !strings.Contains(body, "unsupported_media_type") || !strings.Contains(body, "application/json") {
			t.Errorf("POST /conversations %v: %d %s", args, status, body)
		}
	}
	status, _, body := curl(t, "-H", "Content-Type: text/plain", "--data", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, m.url("/a2a"))
	if status != http.StatusUnsupportedMediaType || !strings.Contains(body, `"jsonrpc":"2.0"`) {
		t.Errorf("POST /a2a text/plain: %d %s", status, body)
	}
	if after := m.conversationCount(t); after != before {
		t.Errorf("refused requests created %d conversations", after-before)
	}
	status, _, body = curl(t, "-H", "Content-Type: application/json", "--data", `{}`, m.url("/conversations"))
	if status != http.StatusCreated {
		t.Errorf("POST /conversations as JSON: %d %s", status, body)
	}
}

// testEmptyBodies: a state-changing request without a body is held to the
// cross-site rule too. A page of another site can post an empty form
// (application/x-www-form-urlencoded, Content-Length: 0), empty text/plain
// or a fetch with no body and no type without a preflight: refused (415,
// 403), nothing created or deleted; curl with no body and no Origin, the
// bridge's own page and the configured origin are served.
func testEmptyBodies(t *testing.T, m *meshProc) {
	_, port, _ := net.SplitHostPort(m.httpAddr)
	before := m.conversationCount(t)
	for _, tc := range []struct {
		name string
		args []string
		want int
		code string
	}{
		{"an empty form", []string{"-H", "Origin: https://evil.example", "--data", ""}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"empty text/plain", []string{"-H", "Origin: https://evil.example", "-H", "Content-Type: text/plain", "--data", ""}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"Content-Length 0, form type", []string{"-X", "POST", "-H", "Origin: https://evil.example", "-H", "Content-Length: 0", "-H", "Content-Type: application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"no type from another site", []string{"-X", "POST", "-H", "Origin: https://evil.example", "-H", "Content-Length: 0"}, http.StatusForbidden, "origin_not_allowed"},
		{"no type from a sandboxed frame", []string{"-X", "POST", "-H", "Origin: null"}, http.StatusForbidden, "origin_not_allowed"},
	} {
		status, _, body := curl(t, append(tc.args, m.url("/conversations"))...)
		if status != tc.want || !strings.Contains(body, tc.code) {
			t.Errorf("POST /conversations, %s: %d %s, want %d %s", tc.name, status, body, tc.want, tc.code)
		}
	}
	if after := m.conversationCount(t); after != before {
		t.Errorf("refused empty requests created %d conversations", after-before)
	}
	for _, origin := range []string{"", "https://app.example", "http://127.0.0.1:" + port} {
		args := []string{"-X", "POST"}
		if origin != "" {
			args = append(args, "-H", "Origin: "+origin)
		}
		status, _, body := curl(t, append(args, m.url("/conversations"))...)
		if status != http.StatusCreated {
			t.Errorf("POST /conversations without a body, Origin %q: %d %s, want 201", origin, status, body)
		}
	}
	_, out := m.try("POST", "/conversations", nil)
	conv := str(out, "conversation", "id")
	status, _, body := curl(t, "-X", "DELETE", "-H", "Origin: https://evil.example", m.url("/conversations/"+conv))
	if status != http.StatusForbidden || !strings.Contains(body, "origin_not_allowed") {
		t.Errorf("DELETE from another site: %d %s, want 403", status, body)
	}
	if st, _ := m.try("GET", "/conversations/"+conv, nil); st != http.StatusOK {
		t.Errorf("the conversation after a refused DELETE: %d, want 200", st)
	}
}

// testHost: a Host header that names no name of the bridge (a DNS
// rebinding: evil.example resolved to 127.0.0.1) is refused with 421; IP
// addresses, localhost and the names of http.hosts are served.
func testHost(t *testing.T, m *meshProc) {
	_, port, _ := net.SplitHostPort(m.httpAddr)
	for host, want := range map[string]int{
		"evil.example:" + port:   http.StatusMisdirectedRequest,
		"evil.example":           http.StatusMisdirectedRequest,
		"agents.example.evil":    http.StatusMisdirectedRequest,
		"agents.example:" + port: http.StatusOK,
		"localhost:" + port:      http.StatusOK,
		"127.0.0.1:" + port:      http.StatusOK,
	} {
		status, _, body := curl(t, "-H", "Host: "+host, m.url("/conversations"))
		if status != want {
			t.Errorf("Host %s: %d, want %d: %s", host, status, want, body)
		}
		if want == http.StatusMisdirectedRequest && !strings.Contains(body, "host_not_allowed") {
			t.Errorf("Host %s: the refusal: %s", host, body)
		}
	}
}

// testCORS: only the configured origin gets a preflight answered and
// Access-Control-Allow-Origin.
func testCORS(t *testing.T, m *meshProc) {
	preflight := func(origin string) (int, http.Header) {
		status, hdr, _ := curl(t, "-X", "OPTIONS", "-H", "Origin: "+origin, "-H", "Access-Control-Request-Method: POST",
			"-H", "Access-Control-Request-Headers: authorization, content-type", m.url("/conversations"))
		return status, hdr
	}
	status, hdr := preflight("https://app.example")
	if status != http.StatusNoContent || hdr.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(hdr.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight of the configured origin: %d %v", status, hdr)
	}
	status, hdr = preflight("https://evil.example")
	if status == http.StatusNoContent || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", status, hdr)
	}
	_, hdr, _ = curl(t, "-H", "Origin: https://evil.example", m.url("/conversations"))
	if v := hdr.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("GET from another origin: Access-Control-Allow-Origin %q", v)
	}
	_, hdr, _ = curl(t, "-H", "Origin: https://app.example", m.url("/conversations"))
	if v := hdr.Get("Access-Control-Allow-Origin"); v != "https://app.example" {
		t.Errorf("GET from the configured origin: Access-Control-Allow-Origin %q", v)
	}
}

// testReusedRunID: an AG-UI run whose runId another thread used is
// refused at once (409 run_id_used) instead of being dropped as a
// duplicate with its stream left hanging; the thread that holds the run
// id is refused a second run with it as before, and the other thread runs
// with a run id of its own.
func testReusedRunID(t *testing.T, m *meshProc) {
	n := time.Now().UnixNano()
	threadA, threadB, run := fmt.Sprintf("t-a-%d", n), fmt.Sprintf("t-b-%d", n), fmt.Sprintf("r-%d", n)
	post := func(thread, run string) (int, string) {
		body := `{"threadId":"` + thread + `","runId":"` + run + `","messages":[{"id":"m-` + run + `","role":"user","content":"list all resources"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`
		status, _, out := curl(t, "-H", "Content-Type: application/json", "-H", "Accept: text/event-stream", "--data", body, m.url("/agui"))
		return status, out
	}
	if status, out := post(threadA, run); status != http.StatusOK || !strings.Contains(out, `"RUN_FINISHED"`) {
		t.Fatalf("thread A, run %s: %d %.500s", run, status, out)
	}
	start := time.Now()
	status, out := post(threadB, run)
	if status != http.StatusConflict || !strings.Contains(out, "run_id_used") || !strings.Contains(out, "another conversation") {
		t.Errorf("thread B, thread A's run id: %d %.500s", status, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	if status, out := post(threadA, run); status != http.StatusConflict || !strings.Contains(out, "run_id_used") {
		t.Errorf("thread A, its own run id again: %d %.500s", status, out)
	}
	if status, out := post(threadB, run+"-b"); status != http.StatusOK || !strings.Contains(out, `"RUN_FINISHED"`) {
		t.Errorf("thread B, a run id of its own: %d %.500s", status, out)
	}
}
