package llmtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// The framing of each API's stream, read raw.

func rawStream(t *testing.T, srv *llmtest.Server, api llmtest.API, path, body string) (http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	return resp.Header, string(data)
}

var parallel = llm.Response{Text: "Checking both.", ToolCalls: []llm.ToolCall{
	{Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)},
	{Name: "get_weather", Arguments: json.RawMessage(`{"location":"Oslo"}`)},
}, Usage: llm.Usage{InputTokens: 11, OutputTokens: 7}}

func TestOpenAIStreamFraming(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, Backend: llmtest.Replies(parallel)})
	for _, includeUsage := range []bool{true, false} {
		body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if includeUsage {
			body = `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		h, out := rawStream(t, srv, llmtest.OpenAI, oaPath, body)
		if !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Errorf("Content-Type %q", h.Get("Content-Type"))
		}
		if !strings.HasSuffix(out, "data: [DONE]\n\n") || strings.Contains(out, "event:") {
			t.Errorf("stream does not end in data: [DONE] or names events:\n%s", out)
		}
		usageChunk := strings.Contains(out, `"choices":[],`) && strings.Contains(out, `"prompt_tokens":11`)
		if usageChunk != includeUsage {
			t.Errorf("include_usage %v: usage chunk present %v:\n%s", includeUsage, usageChunk, out)
		}
		for _, want := range []string{`"delta":{"content":"","refusal":null,"role":"assistant"}`, `"index":1,"type":"function"`, `"finish_reason":"tool_calls"`, `"object":"chat.completion.chunk"`} {
			if !strings.Contains(out, want) {
				t.Errorf("stream lacks %s:\n%s", want, out)
			}
		}
	}
}

func TestAnthropicStreamFraming(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.Anthropic, Backend: llmtest.Replies(parallel)})
	_, out := rawStream(t, srv, llmtest.Anthropic, anPath, `{"model":"claude-sonnet-4-5","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	var events []string
	for _, m := range regexp.MustCompile(`(?m)^event: (\w+)\ndata: \{`).FindAllStringSubmatch(out, -1) {
		events = append(events, m[1])
	}
	got := strings.Join(events, ",")
	want := "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_delta,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s\n%s", got, want, out)
	}
	if !strings.Contains(out, `"stop_reason":"tool_use"`) || !strings.Contains(out, `"output_tokens":7`) {
		t.Errorf("message_delta lacks the stop reason or usage:\n%s", out)
	}
}

func TestGeminiStreamFraming(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.Gemini, Backend: llmtest.Replies(parallel)})
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	_, out := rawStream(t, srv, llmtest.Gemini, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body)
	frames := strings.Split(strings.TrimSuffix(out, "\r\n\r\n"), "\r\n\r\n")
	if len(frames) != 3 || !strings.HasPrefix(frames[0], "data: {") {
		t.Fatalf("want 3 CRLF-separated data frames (two words, then the calls):\n%q", out)
	}
	last := frames[2]
	if !strings.Contains(last, `"finishReason":"STOP"`) || strings.Count(last, `"functionCall"`) != 2 || !strings.Contains(last, `"promptTokenCount":11`) {
		t.Errorf("last chunk lacks the calls, finish reason or usage: %s", last)
	}
	// Without alt=sse the chunks come as one JSON array.
	h, out := rawStream(t, srv, llmtest.Gemini, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", body)
	var chunks []map[string]any
	if err := json.Unmarshal([]byte(out), &chunks); err != nil || len(chunks) != 3 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Errorf("without alt=sse: %v, %d chunks, %q:\n%s", err, len(chunks), h.Get("Content-Type"), out)
	}
}
