package llm

import (
	"reflect"
	"testing"

	"encoding/json"
)

var chunkSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hello \"you\" \u00e9\n"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}`,
	`{"id":"c","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":-2.5e3}}`,
	`{"id":"c","choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":null}`,
	`{"error":{"message":"slow down","type":"rate_limit_exceeded","code":429}}`,
	` { "Choices" : [ { "delta" : { "content" : "case" } } ] } `,
	`{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}`,
	`{"choic\u0065s":[{"delta":{"content":"escaped key"}}]}`,
	`{"choices":[{"delta":{"content":7}}]}`,
	`{"usage":{"prompt_tokens":"ten"}}`,
	`{"choices":[{"delta":{"content":"x"}}]`,
	`{"this is not": JSON`,
	`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":tru}`, `{"a":[1,]}`, `{"a":{"b":1,}}`, `{}`, `[]`, `null`, ``,
	"{\"a\":\"tab\there\"}", `{"ſhoices":[]}`, `{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
}

// decodeOpenAIChunk decodes every chunk as json.Unmarshal does: the same
// value, and an error exactly when json.Unmarshal fails.
func FuzzOpenAIChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got openAIChunk
		werr := json.Unmarshal(data, &want)
		gerr := decodeOpenAIChunk(data, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: json.Unmarshal %v, decodeOpenAIChunk %v", data, werr, gerr)
		}
		if werr != nil {
			if werr.Error() != gerr.Error() {
				t.Fatalf("%q: error %q, want %q", data, gerr, werr)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %+v, want %+v", data, got, want)
		}
	})
}

// The plain chunks of a stream are taken apart by hand, not left whole to
// json.Unmarshal.
func TestChunkFields(t *testing.T) {
	for _, s := range chunkSeeds[:6] {
		if _, ok := chunkFields([]byte(s)); !ok {
			t.Errorf("chunk not taken apart: %s", s)
		}
	}
	for _, s := range chunkSeeds[6:9] {
		if _, ok := chunkFields([]byte(s)); ok {
			t.Errorf("chunk taken apart, though json.Unmarshal reads it otherwise: %s", s)
		}
	}
}
