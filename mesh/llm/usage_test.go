package llm_test

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// Each API reports the prompt tokens its prompt cache served in its own
// field; the decoders read them, whole and streamed, into Usage: input
// counts every prompt token, cached the part read from the cache.

func TestCachedTokensDecoded(t *testing.T) {
	openAIWhole := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini",
		"choices":[{"index":0,"message":{"role":"assistant","content":"ok","refusal":null},"logprobs":null,"finish_reason":"stop"}],
		"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
			"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`
	// With stream_options.include_usage, the last chunk has no choices and
	// the usage; the others say "usage": null.
	openAIStream := "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":null}],\"usage\":null}\n\n" +
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n" +
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":2006,\"completion_tokens\":300,\"total_tokens\":2306,\"prompt_tokens_details\":{\"cached_tokens\":1920}}}\n\n" +
		"data: [DONE]\n\n"
	// Anthropic's input_tokens leaves out the cache's reads and writes.
	anthropicWhole := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],
		"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":86,"cache_creation_input_tokens":120,"cache_read_input_tokens":1800,"output_tokens":300,"service_tier":"standard"}}`
	anthropicStream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null," +
		"\"usage\":{\"input_tokens\":86,\"cache_creation_input_tokens\":120,\"cache_read_input_tokens\":1800,\"output_tokens\":1}}}\n\n" +
		anthropicText +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":300}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	geminiUsage := `"usageMetadata":{"promptTokenCount":2006,"candidatesTokenCount":290,"thoughtsTokenCount":10,"totalTokenCount":2306,"cachedContentTokenCount":1920,
		"promptTokensDetails":[{"modality":"TEXT","tokenCount":2006}],"cacheTokensDetails":[{"modality":"TEXT","tokenCount":1920}]}`
	geminiWhole := `{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP","index":0}],` + geminiUsage + `,"modelVersion":"gemini-2.5-flash"}`
	geminiStream := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ok\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":2006,\"candidatesTokenCount\":1,\"totalTokenCount\":2007,\"cachedContentTokenCount\":1920}}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]," + strings.ReplaceAll(strings.ReplaceAll(geminiUsage, "\n", ""), "\t", "") + "}\r\n\r\n"

	openAIWant := llm.Usage{InputTokens: 2006, OutputTokens: 300, CachedTokens: 1920}
	tests := []struct {
		name   string
		w      wire
		stream bool
		fault  llmtest.Fault
		want   llm.Usage
	}{
		{"openai", openAIWire, false, llmtest.Fault{Body: openAIWhole}, openAIWant},
		{"openai stream", openAIWire, true, stream(openAIStream), openAIWant},
		{"anthropic", anthropicWire, false, llmtest.Fault{Body: anthropicWhole}, llm.Usage{InputTokens: 2006, OutputTokens: 300, CachedTokens: 1800, CacheWriteTokens: 120}},
		{"anthropic stream", anthropicWire, true, stream(anthropicStream), llm.Usage{InputTokens: 2006, OutputTokens: 300, CachedTokens: 1800, CacheWriteTokens: 120}},
		{"gemini", geminiWire, false, llmtest.Fault{Body: geminiWhole}, llm.Usage{InputTokens: 2006, OutputTokens: 300, CachedTokens: 1920}},
		{"gemini stream", geminiWire, true, stream(geminiStream), llm.Usage{InputTokens: 2006, OutputTokens: 300, CachedTokens: 1920}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.w)
			f.Fail(tt.fault)
			resp, _, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tt.want {
				t.Errorf("usage %+v, want %+v", resp.Usage, tt.want)
			}
		})
	}
}

// The wire fakes report the cache counts they are configured with, in
// each API's fields, whole and streamed.
func TestFakesReportCachedTokens(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		for _, streamed := range []bool{false, true} {
			key := testKey
			if w.name == "ollama" {
				key = ""
			}
			srv := llmtest.Start(t, llmtest.Config{API: w.api, APIKey: key, CachedTokens: 7, CacheWriteTokens: 3,
				Backend: answers(reply{Text: []string{"ok"}, Usage: llm.Usage{InputTokens: 40, OutputTokens: 2}})})
			f := &fake{Server: srv, t: t, w: w}
			resp, _, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), streamed)
			if err != nil {
				t.Fatal(err)
			}
			want := llm.Usage{InputTokens: 40, OutputTokens: 2, CachedTokens: 7}
			if w.api == llmtest.Anthropic {
				want.CacheWriteTokens = 3 // the only API that reports writes
			}
			if resp.Usage != want {
				t.Errorf("stream %v: usage %+v, want %+v", streamed, resp.Usage, want)
			}
		}
	})
}
