package llmtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// Scripted faults, as the real providers of package llm see them.

func hello(stream bool) llm.Request {
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}
	if stream {
		req.OnText = func(string) {}
	}
	return req
}

func llmError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return e
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name     string
		fault    llmtest.Fault
		opts     func(*llm.Options)
		wantCode string
		wantIs   error
		// wantRequests the provider makes (1 + its retries);
		// streamRequests when it streams, if different.
		wantRequests, streamRequests int
		// atLeast: wantRequests is a floor.
		atLeast bool
	}{
		{name: "500 repeated", fault: llmtest.Fault{Status: 500, Times: -1}, wantCode: llm.CodeError, wantRequests: 3},
		{name: "503 repeated", fault: llmtest.Fault{Status: 503, Times: -1}, wantCode: llm.CodeError, wantRequests: 3},
		// A 429 spends no retry: it is sent again until its waits reach
		// max_queue_wait, more often than the two retries allow.
		{name: "429 until max_queue_wait", fault: llmtest.Fault{Status: 429, Times: -1}, opts: func(o *llm.Options) { o.MaxQueueWait = 200 * time.Millisecond },
			wantCode: llm.CodeRateLimit, wantRequests: 4, atLeast: true},
		{name: "400 not retried", fault: llmtest.Fault{Status: 400, Message: "bad", Times: -1}, wantCode: llm.CodeError, wantRequests: 1},
		{name: "reset", fault: llmtest.Fault{Reset: true, Times: -1}, wantCode: llm.CodeError, wantRequests: 3},
		{name: "malformed", fault: llmtest.Fault{Malformed: true, Times: -1}, wantCode: llm.CodeError, wantIs: llm.ErrMalformedResponse, wantRequests: 1},
		// A stream cut after some text is not retried: the text reached the
		// caller.
		{name: "cut", fault: llmtest.Fault{Cut: true, Times: -1}, wantCode: llm.CodeError, wantIs: llm.ErrStreamInterrupted, wantRequests: 3, streamRequests: 1},
		{name: "hang", fault: llmtest.Fault{Hang: true, Times: -1}, opts: func(o *llm.Options) { o.Timeout = 300 * time.Millisecond },
			wantCode: llm.CodeTimeout, wantIs: context.DeadlineExceeded, wantRequests: 1},
	}
	for _, tg := range targets()[:3] {
		for _, stream := range []bool{false, true} {
			for _, tt := range tests {
				name := tg.name + "/" + map[bool]string{false: "whole", true: "stream"}[stream] + "/" + tt.name
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Backend: llmtest.Replies(llm.Response{Text: "a long enough answer to cut in half", Usage: llm.Usage{InputTokens: 3, OutputTokens: 4}})})
					p := client(t, srv, tg.model, tt.opts)
					srv.Fail(tt.fault)
					_, err := p.Generate(t.Context(), hello(stream))
					e := llmError(t, err)
					if e.Code != tt.wantCode || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
						t.Errorf("error %s %v, want code %s wrapping %v", e.Code, err, tt.wantCode, tt.wantIs)
					}
					if strings.Contains(err.Error(), testKey) {
						t.Errorf("error %q shows the key", err)
					}
					want := tt.wantRequests
					if stream && tt.streamRequests != 0 {
						want = tt.streamRequests
					}
					if n := srv.Count(); n != want && !(tt.atLeast && n > want) {
						t.Errorf("%d requests, want %d", n, want)
					}
					// The server recovers; so does the client.
					srv.Recover()
					resp, err := p.Generate(t.Context(), hello(stream))
					if err != nil || resp.Text != "a long enough answer to cut in half" {
						t.Errorf("after Recover: %v %v", resp, err)
					}
				})
			}
		}
	}
}

// TestRetryAfter: each API's way of saying when to retry reaches the
// client: a 429 then an answer succeeds, and without retries the error
// carries the wait.
func TestRetryAfter(t *testing.T) {
	for _, tg := range targets()[:3] {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Backend: llmtest.Replies(llm.Response{Text: "ok"})})
			srv.Fail(llmtest.Fault{Status: 429, RetryAfter: 10 * time.Millisecond})
			if _, err := client(t, srv, tg.model, nil).Generate(t.Context(), hello(true)); err != nil {
				t.Fatalf("a 429 then an answer: %v", err)
			}
			if n := srv.Count(); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
			srv.Fail(llmtest.Fault{Status: 429, RetryAfter: 7 * time.Second})
			_, err := client(t, srv, tg.model, func(o *llm.Options) { o.MaxRetries = -1 }).Generate(t.Context(), hello(false))
			e := llmError(t, err)
			if e.Code != llm.CodeRateLimit || e.RetryAfter != 7*time.Second {
				t.Errorf("error %s, retry after %v, want RATE_LIMIT and 7s", e.Code, e.RetryAfter)
			}
		})
	}
}

// TestFaultsInOrder: queued faults are served in order, Times counted.
func TestFaultsInOrder(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, Backend: llmtest.Replies()})
	srv.Fail(llmtest.Fault{Status: 500, Times: 2}, llmtest.Fault{Status: 429}, llmtest.Fault{})
	var got []int
	for range 5 {
		status, _, _ := send(t, srv, llmtest.OpenAI, validCase(llmtest.OpenAI))
		got = append(got, status)
	}
	if want := []int{500, 500, 429, 500, 200}; !equalInts(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	recs := srv.Requests()
	if recs[2].Fault == nil || recs[2].Fault.Status != 429 || recs[4].Fault != nil {
		t.Errorf("records do not name the faults served: %+v %+v", recs[2].Fault, recs[4].Fault)
	}
	if n := len(srv.Answered()); n != 1 {
		t.Errorf("%d answered, want 1", n)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBackendErrors: a failing backend becomes the API's error answer,
// before or during a stream.
func TestBackendErrors(t *testing.T) {
	limited := llmtest.Func(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		return nil, &llm.Error{Code: llm.CodeRateLimit, Status: 429, Message: "slow down", RetryAfter: 3 * time.Second}
	})
	midway := llmtest.Func(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if req.OnText != nil {
			req.OnText("partial ")
		}
		return nil, errors.New("backend broke")
	})
	for _, tg := range targets()[:3] {
		t.Run(tg.name, func(t *testing.T) {
			srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Backend: limited})
			_, err := client(t, srv, tg.model, func(o *llm.Options) { o.MaxRetries = -1 }).Generate(t.Context(), hello(true))
			if e := llmError(t, err); e.Code != llm.CodeRateLimit || e.Status != 429 || e.RetryAfter != 3*time.Second {
				t.Errorf("rate-limited backend: %s %d %v (%v), want RATE_LIMIT 429 3s", e.Code, e.Status, e.RetryAfter, err)
			}

			srv = llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Backend: midway})
			var got string
			req := hello(true)
			req.OnText = func(d string) { got += d }
			_, err = client(t, srv, tg.model, nil).Generate(t.Context(), req)
			if e := llmError(t, err); e.Code != llm.CodeError || got != "partial " || !strings.Contains(err.Error(), "backend broke") {
				t.Errorf("backend failing mid-stream: %v after %q, want LLM_ERROR with its message after the partial text", err, got)
			}
			if n := srv.Count(); n != 1 {
				t.Errorf("%d requests: a stream that sent text must not be retried", n)
			}
		})
	}
}

// TestCloseEndsHeldRequests: Close returns while a request is held.
func TestCloseEndsHeldRequests(t *testing.T) {
	srv, err := llmtest.New(llmtest.Config{API: llmtest.Gemini})
	if err != nil {
		t.Fatal(err)
	}
	srv.Fail(llmtest.Fault{Hang: true})
	done := make(chan int)
	go func() {
		status, _, _ := sendNoFail(srv, validCase(llmtest.Gemini))
		done <- status
	}()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { srv.Close(); srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a request was held")
	}
	<-done
}

func sendNoFail(srv *llmtest.Server, c rawCase) (int, http.Header, error) {
	req, _ := http.NewRequest(http.MethodPost, srv.URL+c.path, strings.NewReader(c.body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header, nil
}

// TestFaultsOfAStream: Until, Early and End stop a stream where the test
// says, and the client sees what came before: Cut after the first text is
// not retried, Cut before any event is whole is, End is an interrupted
// stream, Hang after the first text times out with that text delivered.
func TestFaultsOfAStream(t *testing.T) {
	backend := llmtest.Func(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		for _, d := range []string{"first ", "second ", "third"} {
			req.OnText(d)
		}
		return &llm.Response{Text: "first second third"}, nil
	})
	tests := []struct {
		name       string
		fault      llmtest.Fault
		opts       func(*llm.Options)
		wantCode   string
		wantIs     error
		wantText   string // streamed to the client
		wantCount  int
		wantStatus int // of the first record
	}{
		{name: "cut until", fault: llmtest.Fault{Cut: true, Until: "first "}, wantCode: llm.CodeError, wantIs: llm.ErrStreamInterrupted, wantText: "first ", wantCount: 1},
		{name: "cut early", fault: llmtest.Fault{Cut: true, Early: true}, wantText: "first second third", wantCount: 2},
		{name: "end until", fault: llmtest.Fault{End: true, Until: "second "}, wantCode: llm.CodeError, wantIs: llm.ErrStreamInterrupted, wantText: "first second ", wantCount: 1, wantStatus: 200},
		{name: "hang until", fault: llmtest.Fault{Hang: true, Until: "first "}, opts: func(o *llm.Options) { o.Timeout = 300 * time.Millisecond },
			wantCode: llm.CodeTimeout, wantIs: context.DeadlineExceeded, wantText: "first ", wantCount: 1},
	}
	for _, tg := range targets()[:3] {
		for _, tt := range tests {
			t.Run(tg.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Backend: backend})
				srv.Fail(tt.fault)
				var got string
				req := hello(true)
				req.OnText = func(d string) { got += d }
				_, err := client(t, srv, tg.model, tt.opts).Generate(t.Context(), req)
				switch {
				case tt.wantCode == "" && err != nil:
					t.Errorf("Generate: %v, want the answer after a retry", err)
				case tt.wantCode != "":
					if e := llmError(t, err); e.Code != tt.wantCode {
						t.Errorf("error code %s (%v), want %s", e.Code, err, tt.wantCode)
					}
					if !errors.Is(err, tt.wantIs) {
						t.Errorf("error %v, want it to wrap %v", err, tt.wantIs)
					}
				}
				if got != tt.wantText {
					t.Errorf("streamed %q, want %q", got, tt.wantText)
				}
				if n := srv.Count(); n != tt.wantCount {
					t.Errorf("%d requests, want %d", n, tt.wantCount)
				}
				if s := srv.Requests()[0].Status; s != tt.wantStatus {
					t.Errorf("first record's status %d, want %d", s, tt.wantStatus)
				}
			})
		}
	}
}

// TestFaultBodyAndHeader: a Body fault answers its body as it is, with its
// status, content type and headers; Header reaches a Status fault too.
func TestFaultBodyAndHeader(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, APIKey: testKey})
	srv.Fail(
		llmtest.Fault{Body: "<html>502 Bad Gateway</html>", ContentType: "text/html", Status: 502, Header: map[string]string{"x-from": "gateway"}},
		llmtest.Fault{Body: `{"choices":[]}`},
		llmtest.Fault{Status: 429, Header: map[string]string{"retry-after": "0"}},
	)
	for _, want := range []struct {
		status              int
		contentType, header string
		header2, body       string
	}{
		{502, "text/html", "x-from", "gateway", "<html>502 Bad Gateway</html>"},
		{200, "application/json", "", "", `{"choices":[]}`},
		{429, "application/json", "retry-after", "0", ""},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+oaPath, strings.NewReader(validCase(llmtest.OpenAI).body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want.status {
			t.Errorf("status %d, want %d", resp.StatusCode, want.status)
		}
		if ct := resp.Header.Get("Content-Type"); ct != want.contentType {
			t.Errorf("Content-Type %q, want %q", ct, want.contentType)
		}
		if want.header != "" && resp.Header.Get(want.header) != want.header2 {
			t.Errorf("%s: %q, want %q", want.header, resp.Header.Get(want.header), want.header2)
		}
		if want.body != "" && string(body) != want.body {
			t.Errorf("body %s, want %s", body, want.body)
		}
	}
}
