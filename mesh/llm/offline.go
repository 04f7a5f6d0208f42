package llm

// The offline planner
//
// The offline planner is the mesh's default model, "offline". It is NOT a
// language model and does not understand language: it is a small,
// deterministic, rule-based planner that maps short imperative requests
// onto the tools it is given, so that the mesh runs end to end (tool
// calls, approvals, loops, streaming) with no API key and no network. The
// same request always gets the same answer.
//
// # What one call does
//
// Generate looks at the last user message and at what came after it in
// this turn (assistant tool calls and tool results), then does the first
// of these that applies:
//
//  1. Speaker selection (see below): the name of the group member who
//     speaks next, alone.
//  2. Loop goal (see below): a step towards "at least N <things>".
//  3. Tool results since the last user message (or since the last
//     assistant text, which ends a loop iteration): a text report of
//     them, and no further call.
//  4. A greeting, thanks, or a question about the planner ("help", "what
//     can you do", "who are you"), or an empty message: a short text
//     answer; help lists the tools (name and description).
//  5. No tools at all: pass on in text what the earlier steps of a
//     pipeline said (assistant texts after the user message), else the
//     request itself, so that a pipeline of offline nodes still works.
//  6. Otherwise: plan one tool call from the message, or ask for missing
//     arguments, or say that no tool matches and list the tools.
//
// # Intents
//
// The request's first action word names its intent; weak words count only
// when no action word is present:
//
//	read    list ls show get find search display view see count read fetch
//	        lookup look query browse print enumerate open check inspect
//	        describe retrieve tell load return
//	        (weak: what what's which how overview give summary summarize
//	        status)
//	create  add create make insert register put post generate build spawn
//	        append save store write upload import provision (weak: new)
//	update  update set change modify rename edit patch alter adjust
//	        replace increment decrement increase decrease
//	delete  remove delete drop destroy erase purge rm del unregister clear
//	        wipe discard eliminate kill
//
// Phrases: "get rid of" and "clean up" delete, "set up" creates, "make
// sure" is no action. A lone verb is a request: "list" calls the list
// tool.
//
// # Choosing a tool
//
// Each tool is classified the same way, from the words of its name (split
// on _ - . and camelCase): resources_list is read, resources_add create.
// A name with no action word takes the actions its description names, and
// a ReadOnly tool with neither is read. Tools are then scored:
//
//   - +100 when the tool's intent is the request's; a tool whose intents
//     exclude the request's is never chosen;
//   - +20 when the request's verb is in the tool's name (or both search);
//   - +15 for each word of the request that is a noun of the tool's name,
//     singular or plural alike (resource, resources), +3 (at most +9) for
//     words of its description;
//   - hints: +5 ReadOnly (−5 Destructive) for a read, +2 Destructive for a
//     change, +3 ReadOnly when the request names no action.
//
// A tool must match the intent or a name noun. Among the best-scored
// tools, the first whose required arguments are all found wins.
//
// # Arguments
//
// Arguments come from the words of the request, guided by each property's
// JSON Schema type and name (its last camelCase word decides: entityNames
// is a list of names). Each word fills at most one property. In order:
//
//  1. A keyword and its value: the property's name ("value 42", "value=42",
//     "value: 42", "value of 42", "name foo"), or a cue word before it:
//     "named X", "called X" (names; for a regular-expression property the
//     exact pattern ^X$, with X quoted by regexp.QuoteMeta), "matching X"
//     (X as written), "containing X" and "like X" (X quoted), and for
//     search terms (query, filter, search …) also "for X" and "about X".
//     Integers and numbers need a number; strings refuse fillers.
//  2. A number property still empty takes the only number left in the
//     request.
//  3. Words shaped like ids (prefix_0a1b2c…, UUIDs, six or more digits,
//     sixteen or more hex digits) fill id properties, and words shaped like
//     paths (with / or \, or starting with ~ or .) fill path properties.
//  4. Free words fill the property that names the target: the first word
//     after the verb that is not a filler ("a", "an", "the", "new", "me",
//     "all", "please" …), not a noun for the kind of thing (the tool's name
//     nouns, and resource, item, server, entity, node …), not a property's
//     keyword and not already used. Case and hyphens are kept ("my-test",
//     "a2a-test-item"). Targets, in order: a name (title, key …); a list of
//     names (all free words); for a delete or update, a regular-expression
//     property as the exact pattern ^name$; a required search term; an id
//     (when required, or for a change to a tool with no name or pattern);
//     a required path or string; a message property (message, task,
//     prompt …) takes the whole request when required or when the tool
//     names no action of its own (an agent reached over A2A); objects and
//     lists of objects are filled the same way, one level down.
//  5. Required lists that may be empty become [], required booleans false.
//
// A read's optional filters (pattern, query …) are set only by a cue: "show
// me all resources" lists everything, "show resources matching test" sets
// pattern "test". When required properties stay empty the planner asks for
// them in text instead of calling: "To add a resource I need: value."; a
// delete or update that found nothing at all asks for one of its
// properties.
//
// # Reports
//
// Tool results are reported in plain words, one paragraph each: a list
// result ({"resources": [...], "count": 2} or a bare array) as its count
// and items (name, value, other details, id); an object from a create as
// "Created resource test-1 (value 42, id res_…)."; a removal count as
// "Removed 2 resources."; an error as "The tool X failed: <text>"; and a
// result whose text starts with "rejected" or "cancelled" as "The
// operation was cancelled: X was not approved.". The raw result follows
// the report when shorter than 2000 characters, so the data is visible.
// MCP CallToolResult JSON is unwrapped to its structured content or text.
//
// # Loops
//
// When the tools include exit_loop and the user's message (or else the
// system prompt) states a goal, "at least N <things>", "N or more
// <things>" or "minimum of N <things>", and there are a read and a create
// tool for <things>, each iteration lists the things, then calls exit_loop
// when there are at least N, or else creates one named "<thing>-<k>" with
// value k*10 (k = count+1, a higher k when the name is taken) and ends
// the iteration with text, or calls exit_loop at once when that one was
// the last needed. After exit_loop's result it answers in text.
//
// # Speaker selection
//
// A request whose system prompt has the line SelectorInstruction ("Reply
// with the name of the next speaker only.") and lists participants as
// lines "- <name>: <description>" (the run of such lines just before that
// line, else just after it) asks who speaks next in a group chat: the llm
// strategy of nodes/group sends it. The planner answers with one
// participant's name and nothing else, and calls no tool. It routes the
// last user or assistant message, not counting a user message that is
// SelectorQuestion ("Who speaks next?"), without the "<name>: " that
// starts a member's answer. Each word of that message that is not a
// filler scores +2 for a participant whose name has it and +1 for one
// whose description has it, singular and plural alike ("deploys" finds
// "deploy"). The best score wins, ties by list order, but never the
// author of the last assistant message while another participant scores.
// When no word scores, the first listed participant that did not speak
// last answers. A "- <name>: …" line whose name is not letters, digits,
// '_' and '-' is not a participant.
//
// # Streaming and usage
//
// Text is delivered through Request.OnText in chunks of a few words whose
// concatenation is Response.Text. Usage counts four characters as a
// token. Generate returns ctx's error when ctx ends, also between chunks.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// offlineModel is the model name of the offline planner.
const offlineModel = "offline"

// Stop reasons of the offline planner.
const (
	offlineStopTool = "tool_use"
	offlineStopEnd  = "end_turn"
	offlineStopMax  = "max_tokens"
)

// chunkWords is how many words each OnText delta holds.
const chunkWords = 4

// NewOffline returns the offline planner, the model "offline": a
// deterministic, rule-based planner that is NOT an LLM. It turns short
// requests into one call of the tools it is given ("list" →
// resources_list {}; "add resource test-2 value 20" → resources_add
// {"name": "test-2", "value": 20}; "remove test-1" → resources_remove
// {"pattern": "^test-1$"}), reports tool results in plain words, asks for
// missing arguments, and reaches "at least N <things>" goals in loops with
// exit_loop. The comment at the top of offline.go documents every rule.
// It is safe for concurrent use.
func NewOffline() Provider { return offline{} }

type offline struct{}

func (offline) Model() string { return offlineModel }

// offlineReply is the planner's decision: text, or one tool call.
type offlineReply struct {
	text string
	tool string
	args map[string]any
}

func (offline) Generate(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := planReply(req)
	resp := &Response{Text: rep.text, StopReason: offlineStopEnd}
	if rep.tool != "" {
		if rep.args == nil {
			rep.args = map[string]any{}
		}
		args, err := json.Marshal(rep.args)
		if err != nil {
			return nil, fmt.Errorf("offline: encode arguments of %s: %w", rep.tool, err)
		}
		resp.ToolCalls = []ToolCall{{ID: callID(req, rep.tool, args), Name: rep.tool, Arguments: args}}
		resp.StopReason = offlineStopTool
	}
	if req.MaxTokens > 0 && len(resp.Text) > 4*req.MaxTokens {
		resp.Text = cutText(resp.Text, 4*req.MaxTokens)
		resp.StopReason = offlineStopMax
	}
	resp.Usage = offlineUsage(req, resp)
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

// planReply decides the reply to req; see the comment at the top of the file.
func planReply(req Request) offlineReply {
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
		return offlineReply{text: reportResults(t.results, indexTools(tools))}
	}
	switch {
	case isHelp(r):
		return offlineReply{text: capabilities(tools)}
	case isGreeting(r.words) && isThanks(r.words):
		return offlineReply{text: "You're welcome!"}
	case isGreeting(r.words):
		return offlineReply{text: "Hello! I am the offline planner of Agent Mesh, a rule-based planner, not an LLM. Ask me what to do, for example \"list\", or \"help\" for what I can do."}
	case len(tools) == 0 && (len(r.words) > 0 || len(t.said) > 0):
		return offlineReply{text: relay(r.text, t.said)}
	case len(r.words) == 0:
		return offlineReply{text: capabilities(tools)}
	}
	c, ok := choose(r, tools)
	if !ok {
		return offlineReply{text: fmt.Sprintf("I could not match %q to any of my tools.\n\n%s", r.text, capabilities(tools))}
	}
	if !c.ex.complete() {
		return offlineReply{text: askText(r, c)}
	}
	return offlineReply{tool: c.p.tool.Name, args: c.ex.args}
}

// offlineTurn is what the planner reads of the history.
type offlineTurn struct {
	// user is the last user message.
	user string
	// results are the tool messages after the last user message and after
	// the last assistant text (which ends a loop iteration), with their
	// ToolName filled from the calls when missing.
	results []Message
	// said are the assistant texts after the last user message: what
	// earlier steps of a pipeline answered.
	said []Message
}

func readTurn(msgs []Message) offlineTurn {
	lastUser := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			lastUser = i
			break
		}
	}
	var t offlineTurn
	if lastUser >= 0 {
		t.user = msgs[lastUser].Content
	}
	start := lastUser + 1
	calls := map[string]string{}
	for i := lastUser + 1; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != RoleAssistant {
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
		if m.Role != RoleTool {
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
func relay(request string, said []Message) string {
	var b strings.Builder
	b.WriteString(offlineIdentity)
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
func callID(req Request, tool string, args []byte) string {
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

// offlineUsage counts four characters as a token, at least one each way.
func offlineUsage(req Request, resp *Response) Usage {
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
	return Usage{InputTokens: max(1, in/4), OutputTokens: max(1, out/4)}
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
