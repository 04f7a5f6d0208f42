package llm

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecoders feeds arbitrary bytes to every decoder, whole and streamed:
// they may refuse them, with an error, but never panic or answer
// arguments that are not a JSON object. Its seeds beside the two below are
// whole and streamed answers of each API, text and calls, in
// testdata/fuzz/FuzzDecoders.
func FuzzDecoders(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":5,\"delta\":{}}\n\n"))
	gemini := newGemini(model(f, "gemini-2.5-flash"), Options{APIKey: "k"})
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(name string, resp *Response, err error) {
			if err != nil {
				var pe *Error
				var ae *apiError
				if !errors.Is(err, ErrMalformedResponse) && !errors.Is(err, ErrStreamInterrupted) && !errors.As(err, &pe) && !errors.As(err, &ae) {
					var re *readError
					if !errors.As(err, &re) {
						t.Errorf("%s: unexpected error type %T: %v", name, err, err)
					}
				}
				return
			}
			for _, c := range resp.ToolCalls {
				if _, err := parseArgs(c.Arguments); err != nil || !bytes.HasPrefix(c.Arguments, []byte("{")) {
					t.Errorf("%s: call %s with arguments %s", name, c.Name, c.Arguments)
				}
			}
		}
		emit := func(string) {}
		resp, err := decodeAnthropic(data)
		check("anthropic", resp, err)
		resp, err = decodeAnthropicStream(newSSEReader(bytes.NewReader(data)), emit, emit)
		check("anthropic stream", resp, err)
		resp, err = decodeOpenAI(data)
		check("openai", resp, err)
		resp, err = decodeOpenAIStream(newSSEReader(bytes.NewReader(data)), emit, emit)
		check("openai stream", resp, err)
		resp, err = gemini.decodeJSON(newCallIDs(), data)
		check("gemini", resp, err)
		resp, err = gemini.decodeStream(newCallIDs(), newSSEReader(bytes.NewReader(data)), emit, emit)
		check("gemini stream", resp, err)
	})
}
