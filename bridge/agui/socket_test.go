package agui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/bridge/core/coretest"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// socketServer serves GET /agui/ws on the fixture's core.
func socketServer(t *testing.T, f *fixture, sc SocketConfig) string {
	t.Helper()
	mux := http.NewServeMux()
	RegisterSocket(mux, Config{Core: f.core}, sc)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + SocketPath
}

type testSocket struct {
	t    *testing.T
	conn *websocket.Conn
}

func dialSocket(t *testing.T, url string) *testSocket {
	t.Helper()
	conn, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	s := &testSocket{t: t, conn: conn}
	if f := s.next(); f.Type != FrameConnectionOpen || f.ConnectionID == "" || f.HeartbeatMs <= 0 || f.MaxThreads <= 0 {
		t.Fatalf("first frame %+v, want connection_open with the connection's id and limits", f)
	}
	return s
}

func (s *testSocket) send(frame string) {
	s.t.Helper()
	if err := s.conn.Write(s.t.Context(), websocket.MessageText, []byte(frame)); err != nil {
		s.t.Fatal(err)
	}
}

// next reads the next frame within 20s.
func (s *testSocket) next() serverFrame {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 20*time.Second)
	defer cancel()
	_, data, err := s.conn.Read(ctx)
	if err != nil {
		s.t.Fatalf("read frame: %v", err)
	}
	var f serverFrame
	if err := json.Unmarshal(data, &f); err != nil {
		s.t.Fatalf("frame %s: %v", data, err)
	}
	return f
}

// untilEnd reads the frames of thread up to its RUN_FINISHED or RUN_ERROR.
func (s *testSocket) untilEnd(thread string) []serverFrame {
	s.t.Helper()
	var out []serverFrame
	for {
		f := s.next()
		if f.Type == "error" {
			s.t.Fatalf("error frame: %+v", f)
		}
		if f.ThreadID != thread {
			continue
		}
		out = append(out, f)
		for _, e := range f.Events {
			if typ := eventType(s.t, e); typ == "RUN_FINISHED" || typ == "RUN_ERROR" {
				return out
			}
		}
	}
}

func eventType(t *testing.T, e json.RawMessage) string {
	t.Helper()
	var v struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(e, &v); err != nil {
		t.Fatalf("event %s: %v", e, err)
	}
	return v.Type
}

// types lists the event types of frames, checking that their sequences
// rise and their cursors end with them.
func types(t *testing.T, frames []serverFrame) []string {
	t.Helper()
	var out []string
	var last uint64
	for i, f := range frames {
		if i > 0 && f.Seq <= last {
			t.Errorf("frame %d: seq %d after %d", i, f.Seq, last)
		}
		last = f.Seq
		if cur, err := parseCursor(f.Cursor); err != nil || cur.seq != f.Seq {
			t.Errorf("frame %d: cursor %q for seq %d (%v)", i, f.Cursor, f.Seq, err)
		}
		for _, e := range f.Events {
			out = append(out, eventType(t, e))
		}
	}
	return out
}

func runFrame(thread, run, text string) string {
	return `{"threadId":"` + thread + `","runId":"` + run + `","messages":[{"id":"m-` + run + `","role":"user","content":"` + text + `"}],"tools":[],"context":[],"forwardedProps":{}}`
}

func TestSocketToolTurnApprovalAndResume(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	coretest.WaitForTools(t, f.core)
	s := dialSocket(t, socketServer(t, f, SocketConfig{}))

	s.send(runFrame("ws-tools", "ws-run-1", "list all resources"))
	got := types(t, s.untilEnd("ws-tools"))
	for _, want := range []string{"RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"} {
		if !slices.Contains(got, want) {
			t.Errorf("tool turn: no %s in %v", want, got)
		}
	}
	if got[0] != "RUN_STARTED" {
		t.Errorf("tool turn starts with %s", got[0])
	}

	// Two threads on one socket: a follow of the first while the second runs.
	s.send(`{"type":"follow","threadId":"ws-tools","after":0}`)
	s.send(runFrame("ws-approval", "ws-run-2", "add resource ws-1 with value 7"))
	paused := s.untilEnd("ws-approval")
	last := paused[len(paused)-1].Events
	if !strings.Contains(string(last[len(last)-1]), `"type":"interrupt"`) {
		t.Fatalf("the run did not end with an interrupt: %s", last[len(last)-1])
	}
	uuid := f.pendingApproval("ws-approval")
	s.send(`{"threadId":"ws-approval","runId":"ws-run-3","messages":[],"resume":[{"interruptId":"` + uuid + `","status":"resolved","payload":{"approved":true}}]}`)
	resumed := types(t, s.untilEnd("ws-approval"))
	if resumed[0] != "RUN_STARTED" || !slices.Contains(resumed, "TOOL_CALL_RESULT") {
		t.Errorf("resume: %v", resumed)
	}
	if c := f.conversation("ws-approval"); c.LastRun == nil || c.LastRun.Outcome != "success" {
		t.Errorf("after the resume: %+v", c.LastRun)
	}
}

func TestSocketReattachGivesEveryEventOnce(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	coretest.WaitForTools(t, f.core)
	url := socketServer(t, f, SocketConfig{})

	s := dialSocket(t, url)
	s.send(runFrame("ws-re", "ws-re-1", "list all resources"))
	first := []serverFrame{s.next(), s.next()}
	_ = s.conn.CloseNow() // a drop: the run goes on

	s2 := dialSocket(t, url)
	s2.send(`{"type":"reattach","threadId":"ws-re","runId":"ws-re-1","cursor":"` + first[1].Cursor + `"}`)
	rest := s2.untilEnd("ws-re")

	// The whole run again, from its start, on a third socket.
	cur, err := parseCursor(first[0].Cursor)
	if err != nil {
		t.Fatal(err)
	}
	s3 := dialSocket(t, url)
	s3.send(`{"type":"reattach","threadId":"ws-re","runId":"ws-re-1","cursor":"` + cur.String() + `"}`)
	whole := append([]serverFrame{first[0]}, s3.untilEnd("ws-re")...)

	joined := append(first, rest...)
	a, b := frameText(t, joined), frameText(t, whole)
	if a != b {
		t.Errorf("before and after the drop:\n%s\nthe whole run:\n%s", a, b)
	}
	if got := types(t, joined); got[len(got)-1] != "RUN_FINISHED" {
		t.Errorf("joined frames end with %s", got[len(got)-1])
	}
}

func frameText(t *testing.T, frames []serverFrame) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestSocketBadFramesAndLimits(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	url := socketServer(t, f, SocketConfig{MaxThreads: 1})
	s := dialSocket(t, url)

	for _, tc := range []struct{ name, frame, code string }{
		{"not JSON", `{"threadId":`, "bad_request"},
		{"unknown type", `{"type":"dance"}`, "bad_request"},
		{"bad id", `{"threadId":"a.b","runId":"r","messages":[]}`, "bad_request"},
		{"bad cursor", `{"type":"reattach","threadId":"t1","runId":"r","cursor":"x"}`, "bad_request"},
		{"unknown thread", `{"type":"follow","threadId":"nowhere"}`, "session_not_found"},
	} {
		s.send(tc.frame)
		if got := s.next(); got.Type != "error" || got.Code != tc.code {
			t.Errorf("%s: got %+v, want an error frame %s", tc.name, got, tc.code)
		}
	}
	if err := s.conn.Write(t.Context(), websocket.MessageBinary, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if got := s.next(); got.Type != "error" {
		t.Errorf("binary frame: %+v", got)
	}

	// Still up: two threads on a socket of one.
	s.send(runFrame("ws-lim-1", "ws-lim-r1", "hello"))
	if got := s.next(); got.Type != "events" || got.ThreadID != "ws-lim-1" {
		t.Fatalf("after the bad frames: %+v", got)
	}
	// A thread has one slot a socket: the run's, while it lasts, else the
	// first follow's. Two follows in a row, then a bad frame as a marker:
	// whenever the run ends, at least the second follow is busy.
	s.send(`{"type":"follow","threadId":"ws-lim-1"}`)
	s.send(`{"type":"follow","threadId":"ws-lim-1"}`)
	s.send(`{"type":"dance"}`)
	busy := 0
	for got := s.nextError(); got.Code != "bad_request"; got = s.nextError() {
		if got.Code != ErrThreadBusy.Kind() {
			t.Errorf("a second follow of a thread: %+v", got)
		}
		busy++
	}
	if busy == 0 {
		t.Errorf("two follows of a thread with a slot of its own: neither was refused %s", ErrThreadBusy.Kind())
	}
	s.send(`{"type":"follow","threadId":"ws-lim-2"}`)
	if got := s.nextError(); got.Code != ErrTooManyThreads.Kind() && got.Code != "session_not_found" {
		t.Errorf("a second thread: %+v", got)
	}
}

// nextError skips event frames up to the next error frame.
func (s *testSocket) nextError() serverFrame {
	s.t.Helper()
	for {
		if f := s.next(); f.Type == "error" {
			return f
		}
	}
}

func TestSocketRefusesOtherOrigins(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	url := socketServer(t, f, SocketConfig{OriginAllowed: func(o string) bool { return o == "https://app.example" }})
	for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "https://app.example": http.StatusSwitchingProtocols} {
		conn, resp, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		if conn != nil {
			_ = conn.CloseNow()
		}
		if resp == nil || resp.StatusCode != want {
			t.Errorf("origin %s: %v %v, want %d", origin, resp, err, want)
		}
	}
}

// A socket opens with a frame naming it and its limits, as configured,
// and a bridge that begins to stop says goodbye with a frame and a close
// frame 1001 that tell the client to reconnect.
func TestSocketOpensWithItsIdAndClosesWhenTheBridgeStops(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	url := socketServer(t, f, SocketConfig{MaxThreads: 3, Heartbeat: 2 * time.Second})
	conn, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	s := &testSocket{t: t, conn: conn}
	open := s.next()
	if open.Type != FrameConnectionOpen || uuid.Validate(open.ConnectionID) != nil || open.HeartbeatMs != 2000 || open.MaxThreads != 3 || open.Timestamp == "" {
		t.Fatalf("first frame %+v, want connection_open with a UUID, heartbeatMs 2000, maxThreads 3 and a timestamp", open)
	}
	if other := dialSocket(t, url); other == nil {
		t.Fatal("no second socket")
	}

	f.core.SetDraining()
	bye := s.next()
	if bye.Type != FrameConnectionClose || bye.ConnectionID != open.ConnectionID || bye.Reason != CloseStopping {
		t.Errorf("frame after draining began %+v, want connection_close of %s with reason %q", bye, open.ConnectionID, CloseStopping)
	}
	_, _, err = conn.Read(t.Context())
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || ce.Reason != CloseStopping {
		t.Errorf("the socket after draining began: %v, want a close frame 1001 %q", err, CloseStopping)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f.core.WaitHeld(ctx)
	if ctx.Err() != nil {
		t.Error("the sockets still held 10s after draining began")
	}
}

// A cancel frame stops the thread's run: the model call ends, the run
// finishes with the outcome cancelled, and the socket stays up.
func TestSocketCancelFrameStopsTheRun(t *testing.T) {
	entered := make(chan struct{}, 1)
	f := newFixture(t, blocking(entered), nil)
	s := dialSocket(t, socketServer(t, f, SocketConfig{}))

	s.send(runFrame("ws-cancel", "ws-cancel-1", "take your time"))
	waitFor(t, entered, "the model call")
	s.send(`{"type":"cancel","threadId":"ws-cancel","runId":"ws-cancel-1"}`)
	frames := s.untilEnd("ws-cancel")
	last := frames[len(frames)-1].Events
	end := string(last[len(last)-1])
	if !strings.Contains(end, `"type":"RUN_FINISHED"`) || !strings.Contains(end, `"cancelled"`) {
		t.Errorf("the run ended with %s, want RUN_FINISHED with the outcome cancelled", end)
	}
	if c := f.conversation("ws-cancel"); c.LastRun == nil || c.LastRun.Outcome != "cancelled" {
		t.Errorf("the conversation's last run %+v, want cancelled", c.LastRun)
	}
	// Still up: a frame gets its answer.
	s.send(`{"type":"follow","threadId":"nowhere"}`)
	if got := s.nextError(); got.Code != "session_not_found" {
		t.Errorf("after the cancel: %+v, want session_not_found", got)
	}
}
