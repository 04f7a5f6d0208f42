package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// stream answers with events as they are, "event: data" pairs.
func stream(events ...string) llmtest.Fault {
	return llmtest.Fault{Body: strings.Join(events, ""), ContentType: "text/event-stream"}
}

const (
	anthropicStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
	anthropicText  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	anthropicOverloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
)

func TestAnthropicErrorEvent(t *testing.T) {
	t.Run("before text: retried", func(t *testing.T) {
		f := newFake(t, anthropicWire)
		f.Fail(stream(anthropicStart, anthropicOverloaded))
		resp, _, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), true)
		if err != nil || resp.Text != "All good." || f.Count() != 2 {
			t.Fatalf("text %v, err %v after %d requests; want a retry after the overloaded event", resp, err, f.Count())
		}
	})
	t.Run("after text: reported", func(t *testing.T) {
		f := newFake(t, anthropicWire)
		f.Fail(stream(anthropicStart, anthropicText, anthropicOverloaded))
		_, deltas, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), true)
		e := wantCode(t, err, llm.CodeError)
		if e.Status != 529 {
			t.Errorf("status %d, want 529 for the overloaded event", e.Status)
		}
		if !strings.Contains(e.Message, "overloaded_error") {
			t.Errorf("error %q, want it to name overloaded_error", e.Message)
		}
		if n := f.Count(); n != 1 {
			t.Errorf("%d requests, want 1: text reached the caller, so no retry", n)
		}
		if got := strings.Join(deltas, ""); got != "Hi" {
			t.Errorf("deltas %q, want the text before the event, Hi", got)
		}
	})
	t.Run("rate limit in stream", func(t *testing.T) {
		f := newFake(t, anthropicWire)
		f.Fail(stream(anthropicStart, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Number of request tokens has exceeded your per-minute rate limit\"}}\n\n"))
		_, _, err := generateWith(t.Context(), f.provider(testOptions(func(o *llm.Options) { o.MaxRetries = -1 })), ask(), true)
		wantCode(t, err, llm.CodeRateLimit)
	})
}

func TestAnthropicThinkingIsNotText(t *testing.T) {
	thinking := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me think.\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"42\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	f := newFake(t, anthropicWire)
	f.Fail(stream(anthropicStart, thinking))
	resp, deltas, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), true)
	if err != nil {
		t.Fatal(err)
	}
	// Only the text block counts.
	if resp.Text != "42" {
		t.Errorf("text %q, want 42", resp.Text)
	}
	if got := strings.Join(deltas, ""); got != "42" {
		t.Errorf("deltas %q, want 42", got)
	}
	if want := (llm.Usage{InputTokens: 25, OutputTokens: 30}); resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
	if resp.StopReason != "end_turn" {
		t.Errorf("stop reason %q, want end_turn", resp.StopReason)
	}
	if want := (llm.Thought{Text: "Let me think.", Signature: "EqQBCgIYAhIM"}); resp.Reasoning != "Let me think." || len(resp.Thoughts) != 1 || resp.Thoughts[0] != want {
		t.Errorf("reasoning %q, thoughts %+v; want the thinking block apart, with its signature", resp.Reasoning, resp.Thoughts)
	}
}

func TestAnthropicToolArgsCutAtMaxTokens(t *testing.T) {
	body := anthropicStart +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"create_item\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"name\\\": \\\"la\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":4096}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	f := newFake(t, anthropicWire)
	f.Fail(stream(body))
	_, _, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), true)
	e := wantCode(t, err, llm.CodeError)
	if !errors.Is(e, llm.ErrMalformedResponse) || !strings.Contains(e.Message, "max_tokens") {
		t.Errorf("error %q: want it to say the call was cut at max_tokens", e.Message)
	}
}

func TestAnthropicVersionedBase(t *testing.T) {
	f := newFake(t, anthropicWire)
	p := newProvider(t, "claude-sonnet-4-5", testOptions(func(o *llm.Options) { o.BaseURL = f.URL + "/v1" }))
	if _, err := p.Generate(t.Context(), ask()); err != nil {
		t.Fatalf("base URL ending in /v1: %v", err)
	}
}

func TestMaxTokens(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		p := f.provider(testOptions(func(o *llm.Options) { o.MaxTokens = 500 }))
		if _, err := p.Generate(t.Context(), ask()); err != nil {
			t.Fatal(err)
		}
		if got := f.last().Request.MaxTokens; got != 500 {
			t.Errorf("Options.MaxTokens 500 sent as %d", got)
		}
		req := ask()
		req.MaxTokens = 77
		if _, err := p.Generate(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if got := f.last().Request.MaxTokens; got != 77 {
			t.Errorf("Request.MaxTokens 77 sent as %d", got)
		}
	})
}
