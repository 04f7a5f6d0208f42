package llmtest

import (
	"context"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// Func is a backend made of a function, to script answers. It streams only
// what it passes to req.OnText itself; the server sends the rest of the
// text at the end.
type Func func(ctx context.Context, req llm.Request) (*llm.Response, error)

// Model names the backend.
func (Func) Model() string { return "llmtest:func" }

// Generate calls f.
func (f Func) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return f(ctx, req)
}

// Replies is a backend that answers the n-th call with replies[n] (the
// last one again once they are used up), streaming its text word by word
// through OnText.
func Replies(replies ...llm.Response) llm.Provider {
	if len(replies) == 0 {
		replies = []llm.Response{{Text: "ok", StopReason: "end_turn"}}
	}
	var mu sync.Mutex
	n := 0
	return Func(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		mu.Lock()
		r := replies[min(n, len(replies)-1)]
		n++
		mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if req.OnText != nil {
			for _, w := range words(r.Text) {
				req.OnText(w)
			}
		}
		r.ToolCalls = append([]llm.ToolCall(nil), r.ToolCalls...)
		return &r, nil
	})
}

// words splits s into words, each with the spaces that follow it, so
// that they join back into s.
func words(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		j := i
		for j < len(s) && s[j] == ' ' {
			j++
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}
