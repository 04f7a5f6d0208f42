// Package llm is the agent's view of a language model: one [Provider]
// interface with function calling and streaming, and its implementations.
//
// A provider gets the whole conversation each call (system prompt, history,
// tool results as native tool messages, tool schemas) and answers with text,
// tool calls, or both. Text is streamed through [Request.OnText] as it is
// produced when the caller sets it.
package llm

import (
	"context"
	"encoding/json"
)

// Role is the author of a message sent to a model.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of the history sent to a model.
type Message struct {
	Role    Role
	Content string
	// Name is the agent (tree node, group member) that wrote an assistant message.
	Name string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID and ToolName link a tool message to the call it answers.
	ToolCallID string
	ToolName   string
	// IsError marks a tool result that is a failure.
	IsError bool
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (an object schema).
	Parameters json.RawMessage
	// ReadOnly and Destructive are the tool's hints, for planners that use them.
	ReadOnly    bool
	Destructive bool
}

// ToolCall is a call the model asked for.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is a JSON object.
	Arguments json.RawMessage
}

// Request is one call to a model.
type Request struct {
	System   string
	Messages []Message
	Tools    []Tool
	// OnText, when set, receives the reply's text as it is generated, in
	// order; the concatenation of the deltas is Response.Text.
	OnText func(delta string)
	// MaxTokens caps the reply. Zero means the provider's default.
	MaxTokens int
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Response is a model's answer: text, tool calls, or both.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// StopReason is the provider's reason for stopping, as it names it.
	StopReason string
}

// Provider is a language model.
type Provider interface {
	// Model names the model, e.g. "offline" or "anthropic:claude-sonnet-4-5".
	Model() string
	// Generate sends req and returns the model's answer. It returns when ctx
	// ends, with ctx's error.
	Generate(ctx context.Context, req Request) (*Response, error)
}
