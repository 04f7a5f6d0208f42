package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// The contents of a Gemini request: turns of parts, checked as the API
// checks them (function call and response counts, thought signatures),
// converted to llm messages.

// geminiDecodeContents checks the turns and converts them.
func geminiDecodeContents(contents []geminiContent, req *llm.Request) *apiError {
	var calls []llm.ToolCall // the previous model turn's calls
	for i, ct := range contents {
		at := fmt.Sprintf("contents[%d]", i)
		role := ct.Role
		switch role {
		case "", "user":
			role = "user"
		case "model":
		default:
			return geminiBad("Please use a valid role: user, model.")
		}
		if len(ct.Parts) == 0 {
			return geminiBad("* GenerateContentRequest.%s.parts: contents.parts must not be empty.", at)
		}
		var texts []string
		var files []llm.File
		var newCalls []llm.ToolCall
		var results []llm.Message
		answered := make([]bool, len(calls))
		for j, p := range ct.Parts {
			pat := fmt.Sprintf("%s.parts[%d]", at, j)
			switch d := p.data(); {
			case len(d) == 0:
				return geminiBad("* GenerateContentRequest.%s.data: required oneof field 'data' must have one initialized field", pat)
			case len(d) > 1:
				return geminiBad("Invalid JSON payload received. Invalid value at '%s': oneof field 'data' is already set. Cannot set '%s'", pat, d[1])
			}
			switch {
			case len(p.InlineData) > 0 || len(p.FileData) > 0:
				f, e := geminiFile(pat, role, &p)
				if e != nil {
					return e
				}
				files = append(files, f)
			case p.Text != nil:
				if !p.Thought {
					texts = append(texts, *p.Text)
				}
			case p.FunctionCall != nil:
				fc := p.FunctionCall
				if role != "model" {
					return geminiBad("* GenerateContentRequest.%s.function_call: function calls are only allowed in model turns", pat)
				}
				if fc.Name == "" {
					return geminiBad("* GenerateContentRequest.%s.function_call.name: Name cannot be empty.", pat)
				}
				if k := jsonKind(fc.Args); k != "" && k != "object" {
					return geminiBad("Invalid JSON payload received. Invalid value at '%s.function_call.args' (type.googleapis.com/google.protobuf.Struct), %s", pat, fc.Args)
				}
				id := fc.ID
				if id == "" {
					id = fmt.Sprintf("gemini-call-%d-%d", i, j)
				}
				newCalls = append(newCalls, llm.ToolCall{ID: id, Name: fc.Name, Arguments: objectArgs(fc.Args)})
			case p.FunctionResponse != nil:
				fr := p.FunctionResponse
				if role != "user" {
					return geminiBad("* GenerateContentRequest.%s.function_response: function responses are only allowed in user turns", pat)
				}
				if len(calls) == 0 {
					return geminiBad("Please ensure that function response turn comes immediately after a function call turn.")
				}
				if fr.Name == "" {
					return geminiBad("* GenerateContentRequest.%s.function_response.name: Name cannot be empty.", pat)
				}
				if jsonKind(fr.Response) != "object" {
					return geminiBad("Invalid JSON payload received. Invalid value at '%s.function_response.response' (type.googleapis.com/google.protobuf.Struct), %s", pat, fr.Response)
				}
				k := answer(calls, answered, fr.ID, fr.Name)
				if k < 0 {
					return geminiBad("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
				}
				answered[k] = true
				content, isErr := geminiResult(fr.Response)
				results = append(results, llm.Message{Role: llm.RoleTool, Content: content, ToolCallID: calls[k].ID, ToolName: fr.Name, IsError: isErr})
			}
		}
		if role == "model" {
			if len(newCalls) > 0 && (i == 0 || contentRole(contents[i-1]) != "user") {
				return geminiBad("Please ensure that function call turn comes immediately after a user turn or after a function response turn.")
			}
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: strings.Join(texts, ""), ToolCalls: newCalls})
			calls = newCalls
			continue
		}
		if len(calls) > 0 {
			if len(results) != len(calls) {
				return geminiBad("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
			}
			// Results in the order of the calls.
			sort.SliceStable(results, func(a, b int) bool {
				return callIndex(calls, results[a].ToolCallID) < callIndex(calls, results[b].ToolCallID)
			})
		}
		req.Messages = append(req.Messages, results...)
		if len(texts) > 0 || len(files) > 0 {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: strings.Join(texts, ""), Files: files})
		}
		calls = nil
	}
	return nil
}

func contentRole(c geminiContent) string {
	if c.Role == "" {
		return "user"
	}
	return c.Role
}

// answer finds the call a function response answers: by id, else the
// first unanswered call of that name, else the first unanswered call.
func answer(calls []llm.ToolCall, answered []bool, id, name string) int {
	if id != "" {
		for k, c := range calls {
			if c.ID == id && !answered[k] {
				return k
			}
		}
	}
	for k, c := range calls {
		if c.Name == name && !answered[k] {
			return k
		}
	}
	for k := range calls {
		if !answered[k] {
			return k
		}
	}
	return -1
}

func callIndex(calls []llm.ToolCall, id string) int {
	for k, c := range calls {
		if c.ID == id {
			return k
		}
	}
	return len(calls)
}

// geminiResult reads a function response: {"result": …} or
// {"output": …}, {"error": …}, else the whole object.
func geminiResult(raw json.RawMessage) (string, bool) {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	text := func(v json.RawMessage) string {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	if len(m) == 1 {
		for _, k := range []string{"result", "output", "content"} {
			if v, ok := m[k]; ok {
				return text(v), false
			}
		}
		if v, ok := m["error"]; ok {
			return text(v), true
		}
	}
	return string(raw), false
}

// checkSignatures requires, in the current turn (the contents after the
// last user text), a thought signature this server handed out (or a
// documented placeholder) on the first function call of every model turn.
func (s *Server) checkSignatures(contents []geminiContent) *apiError {
	start := 0
	for i, c := range contents {
		if contentRole(c) != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != nil {
				start = i + 1
				break
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := start; i < len(contents); i++ {
		c := contents[i]
		if c.Role != "model" {
			continue
		}
		for j, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			if sig := p.ThoughtSignature; sig == "" || !(s.sigs[sig] || geminiSkipSignatures[sig]) {
				what := "is missing a thought_signature"
				if sig != "" {
					what = "has a thought_signature this model did not produce"
				}
				return geminiBad("Function call %s in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", what, p.FunctionCall.Name, j+1)
			}
			break // only the first call of a turn carries one
		}
	}
	return nil
}

// signature makes up a thought signature and remembers it.
func (s *Server) signature() string {
	sig := base64.StdEncoding.EncodeToString([]byte(randomID("llmtest-thought-", 24)))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sigs[sig] = true
	return sig
}
