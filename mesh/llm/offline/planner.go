package offline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// modelName is the model name of the offline planner.
const modelName = "offline"

// Stop reasons of the offline planner.
const (
	stopTool = "tool_use"
	stopEnd  = "end_turn"
	stopMax  = "max_tokens"
)

// chunkWords is how many words each OnText delta holds.
const chunkWords = 4

// New returns the offline planner, the model "offline": a
// deterministic, rule-based planner that is NOT an LLM. It turns short
// requests into one call of the tools it is given ("list" →
// resources_list {}; "add resource test-2 value 20" → resources_add
// {"name": "test-2", "value": 20}; "remove test-1" → resources_remove
// {"pattern": "^test-1$"}), reports tool results in plain words, asks for
// missing arguments, and reaches "at least N <things>" goals in loops with
// exit_loop. The package doc documents every rule.
// It is safe for concurrent use.
func New() llm.Provider { return planner{} }

type planner struct{}

func (planner) Model() string { return modelName }

// reply is the planner's decision: text, or one tool call.
type reply struct {
	text string
	tool string
	args map[string]any
}

func (planner) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := planReply(req)
	resp := &llm.Response{Text: rep.text, StopReason: stopEnd}
	if rep.tool != "" {
		if rep.args == nil {
			rep.args = map[string]any{}
		}
		args, err := json.Marshal(rep.args)
		if err != nil {
			return nil, fmt.Errorf("offline: encode arguments of %s: %w", rep.tool, err)
		}
		resp.ToolCalls = []llm.ToolCall{{ID: callID(req, rep.tool, args), Name: rep.tool, Arguments: args}}
		resp.StopReason = stopTool
	}
	if req.MaxTokens > 0 && len(resp.Text) > 4*req.MaxTokens {
		resp.Text = cutText(resp.Text, 4*req.MaxTokens)
		resp.StopReason = stopMax
	}
	resp.Usage = usage(req, resp)
	if req.OnText != nil {
		for _, c := range textChunks(resp.Text, chunkWords) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			req.OnText(c)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return resp, nil
}

// planReply decides the reply to req; see "What one call does" in the
// package doc.
func planReply(req llm.Request) reply {
	if rep, ok := planSelection(req); ok {
		return rep
	}
	tools := profileTools(req.Tools)
	t := readTurn(req.Messages)
	r := readRequest(t.user)
	if rep, ok := planLoop(t.user, req.System, t.results, tools); ok {
		return rep
	}
	if len(t.results) > 0 {
		return reply{text: reportResults(t.results, indexTools(tools))}
	}
	switch {
	case isHelp(r):
		return reply{text: capabilities(tools)}
	case isGreeting(r.words) && isThanks(r.words):
		return reply{text: "You're welcome!"}
	case isGreeting(r.words):
		return reply{text: "Hello! I am the offline planner of Agent Mesh, a rule-based planner, not an LLM. Ask me what to do, for example \"list\", or \"help\" for what I can do."}
	case len(tools) == 0 && (len(r.words) > 0 || len(t.said) > 0):
		return reply{text: relay(r.text, t.said)}
	case len(r.words) == 0:
		return reply{text: capabilities(tools)}
	}
	c, ok := choose(r, tools)
	if !ok {
		return reply{text: fmt.Sprintf("I could not match %q to any of my tools.\n\n%s", r.text, capabilities(tools))}
	}
	if !c.ex.complete() {
		return reply{text: askText(r, c)}
	}
	return reply{tool: c.p.tool.Name, args: c.ex.args}
}

// turn is what the planner reads of the history.
type turn struct {
	// user is the last user message.
	user string
	// results are the tool messages after the last user message and after
	// the last assistant text (which ends a loop iteration), with their
	// ToolName filled from the calls when missing.
	results []llm.Message
	// said are the assistant texts after the last user message: what
	// earlier steps of a pipeline answered.
	said []llm.Message
}

func readTurn(msgs []llm.Message) turn {
	lastUser := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			lastUser = i
			break
		}
	}
	var t turn
	if lastUser >= 0 {
		t.user = msgs[lastUser].Content
	}
	start := lastUser + 1
	calls := map[string]string{}
	for i := lastUser + 1; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != llm.RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls {
			calls[c.ID] = c.Name
		}
		if strings.TrimSpace(m.Content) != "" {
			t.said = append(t.said, m)
			if len(m.ToolCalls) == 0 {
				start = i + 1
			}
		}
	}
	for _, m := range msgs[start:] {
		if m.Role != llm.RoleTool {
			continue
		}
		if m.ToolName == "" {
			m.ToolName = calls[m.ToolCallID]
		}
		t.results = append(t.results, m)
	}
	return t
}

// relay is the answer of a planner with no tools: what earlier steps
// said, else the request itself, last and unquoted, so that a next step
// reading this text as its request finds it.
func relay(request string, said []llm.Message) string {
	var b strings.Builder
	b.WriteString(identity)
	if len(said) == 0 {
		b.WriteString(" No tools are available to me here, so I pass the request on as it is: ")
		b.WriteString(strings.TrimSpace(request))
		return b.String()
	}
	b.WriteString(" No tools are available to me here, so I pass on what the previous steps said:")
	for _, m := range said {
		b.WriteString("\n\n")
		if m.Name != "" {
			b.WriteString(m.Name + ": ")
		}
		b.WriteString(strings.TrimSpace(m.Content))
	}
	return b.String()
}

func indexTools(tools []*toolProfile) map[string]*toolProfile {
	m := make(map[string]*toolProfile, len(tools))
	for _, p := range tools {
		m[p.tool.Name] = p
	}
	return m
}

// callID is "call_" and 12 hex digits of a hash of the call and the
// length of the history: the same request gets the same id, a repeated
// call later in the conversation another.
func callID(req llm.Request, tool string, args []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00", len(req.Messages), tool)
	h.Write(args)
	for _, m := range req.Messages {
		h.Write([]byte(m.Content))
	}
	return "call_" + hex.EncodeToString(h.Sum(nil))[:12]
}

// textChunks cuts s after every n words, keeping the spaces, so that the
// chunks concatenate to s.
func textChunks(s string, n int) []string {
	var out []string
	start, words, inWord := 0, 0, false
	for i, r := range s {
		if unicode.IsSpace(r) {
			if inWord {
				words++
				inWord = false
			}
			continue
		}
		if !inWord && words >= n {
			out = append(out, s[start:i])
			start, words = i, 0
		}
		inWord = true
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// usage counts four characters as a token, at least one each way.
func usage(req llm.Request, resp *llm.Response) llm.Usage {
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	out := len(resp.Text)
	for _, c := range resp.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	return llm.Usage{InputTokens: max(1, in/4), OutputTokens: max(1, out/4)}
}

// cutText cuts s to at most n bytes without splitting a character.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
