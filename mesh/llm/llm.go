// Package llm is the mesh's view of a language model: one [Provider]
// interface with function calling and streaming, the cloud providers that
// implement it, and the speaker selection convention ([Selection]). Both
// roles that call models, the agent (nodes/agent) and the group
// (nodes/group), import it; it imports no role.
//
// A provider gets the whole conversation each call (system prompt, history,
// tool results as native tool messages, tool schemas) and answers with text,
// tool calls, or both. Text is streamed through [Request.OnText] as it is
// produced when the caller sets it.
//
// # Quick start
//
//	model, _ := modelspec.ParseModel("gpt-4o-mini")
//	p, err := llm.NewCloud(model, llm.Options{APIKey: key})
//	resp, err := p.Generate(ctx, llm.Request{
//		System:   "You are friendly.",
//		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say hello"}},
//		OnText:   func(delta string) { fmt.Print(delta) },
//	})
//
// Read ExampleNewCloud, which runs against llmtest's local stand-in for
// the OpenAI API.
//
// # Packages
//
//	mesh/llm            Provider, messages, cloud providers, Selection
//	mesh/llm/modelspec  model names and providers, Sampling, API keys
//	mesh/llm/offline    the offline planner, the model "offline" (no network)
//	mesh/llm/models     the provider of a model name, offline included
//	mesh/llm/llmtest    local servers speaking each cloud API, for tests
//
// A process builds its providers with models.FromConfigWith (model name,
// configuration, logger). That factory lives in a package of its own
// because the offline planner imports this package for its types: a
// factory here that returned the planner would be an import cycle.
//
// # Providers
//
// [NewCloud] returns the provider of a model served over HTTP, and
// models.OptionsFromConfig the options a configuration sets for it:
//
//   - gemini-… or google:…: the Gemini API, POST
//     {base}/v1beta/models/{model}:generateContent, or
//     :streamGenerateContent?alt=sse to stream (gemini.go). Key
//     GEMINI_API_KEY, sent as x-goog-api-key; base
//     https://generativelanguage.googleapis.com or GEMINI_BASE_URL.
//   - claude-… or anthropic:…: the Messages API, POST {base}/v1/messages
//     (anthropic.go). Key ANTHROPIC_API_KEY, sent as x-api-key with
//     anthropic-version 2023-06-01; base https://api.anthropic.com or
//     ANTHROPIC_BASE_URL.
//   - gpt-…, the o series or openai:…: Chat Completions, POST
//     {base}/chat/completions (openai.go). Key OPENAI_API_KEY, sent as
//     Authorization: Bearer; base https://api.openai.com/v1 or
//     OPENAI_BASE_URL.
//   - ollama:…: Chat Completions at http://localhost:11434/v1 or
//     OLLAMA_BASE_URL, no key.
//   - command-… or cohere:…: Cohere's OpenAI-compatible Chat Completions
//     at https://api.cohere.ai/compatibility/v1 or COHERE_BASE_URL. Key
//     COHERE_API_KEY, sent as Authorization: Bearer.
//
// Any OpenAI-compatible server works as openai:<model> with its base URL and
// no key: vLLM (http://host:8000/v1), llama.cpp's llama-server
// (http://host:8080/v1), LM Studio (http://localhost:1234/v1), gateways. For
// Ollama, `ollama pull llama3.2` then use llm.model: ollama:llama3.2 (a model
// trained for tool use, such as llama3.1+, qwen2.5+ or mistral-nemo, is
// needed for tools). The API keys come from the environment only and are sent
// to their provider and nowhere else.
//
// # Speaker selection
//
// [Selection.Request] asks any model which participant of a multi-party
// chat speaks next: the participants as "- <name>: <description>" lines,
// then [SelectorInstruction]; [ReadSelection] reads such a request back,
// which is how the offline planner recognizes and answers it. A group
// chat's llm strategy builds its requests this way (selection.go).
//
// # Robustness
//
// Every call of a cloud provider is bounded by [Options].Timeout (60s),
// covering retries and the whole stream. It is retried ([Options].MaxRetries,
// 3) on 408, 429, 500, 502, 503, 504, 529 and connection failures, waiting
// what the provider asks (Retry-After in seconds or as a date,
// retry-after-ms, Gemini's RetryInfo) or else an exponential backoff with
// full jitter; it is never retried once text has reached OnText (or
// reasoning OnReasoning). A circuit
// breaker per endpoint (provider and base URL, shared by the process) opens
// after [Options].BreakerFailures consecutive failed attempts and fails calls
// fast for [Options].BreakerCooldown. Failures are [*Error] values whose
// RunErrorCode is LLM_TIMEOUT, RATE_LIMIT or LLM_ERROR; their messages never
// hold an API key.
//
// # Reasoning, caching and structured output
//
// [Options].Reasoning asks a model to reason (Anthropic's thinking,
// OpenAI's reasoning_effort, Gemini's thinkingConfig); what the provider
// returns of it goes to [Request].OnReasoning and [Response].Reasoning,
// and Anthropic's signed thinking blocks come back in Response.Thoughts, to
// be sent back on the assistant message ([Message].Thoughts). The Anthropic
// provider marks the system prompt and the tools for its prompt cache
// (cache_control) unless [Options].NoPromptCache; OpenAI and Gemini cache
// prompts on their own. [Request].Output asks for a JSON object matching a
// schema (output.go); the caller validates what comes back.
//
// Providers start no goroutines: Generate runs on the caller's goroutine,
// calls OnText from it, and returns when ctx ends, with ctx's error
// (errors.Is(err, context.Canceled) after a cancellation). Providers are
// safe for concurrent use.
package llm

import (
	"context"
	"encoding/json"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
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
	// Files are the images and documents of a user message, sent in each
	// API's own form (files.go).
	Files []File
	// Thoughts are the reasoning blocks an assistant message came with that
	// its provider wants back with its tool calls: Anthropic's signed
	// thinking. Only the Anthropic provider sends them, unchanged; the
	// others ignore them, and no reasoning text is ever sent back otherwise.
	Thoughts []Thought `json:",omitempty"`
}

// Thought is one reasoning block of an Anthropic answer, kept as it came:
// a thinking block (Text and its Signature) or a redacted_thinking block
// (Redacted, its opaque data).
type Thought struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
}

// Output asks for the answer as one JSON object matching Schema, in the
// provider's own way (output.go).
type Output struct {
	// Name names the schema (OpenAI's json_schema.name, Anthropic's answer
	// tool): letters, digits, _ and -.
	Name string
	// Schema is a JSON Schema of an object.
	Schema json.RawMessage
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
	// OnReasoning, when set, receives the model's reasoning as it is
	// generated (Anthropic's thinking, Gemini's thought summaries, the
	// reasoning_content of OpenAI-compatible servers), for people to read;
	// the concatenation of the deltas is Response.Reasoning.
	OnReasoning func(delta string)
	// Output, when set, asks for a JSON object matching a schema as the
	// answer's text.
	Output *Output
	// Sampling: max_tokens, temperature and top_p of this call, over the
	// provider's (Options.Sampling). Zero and nil mean the provider's.
	modelspec.Sampling
}

// Usage counts the tokens of a model call. InputTokens counts every token
// of the prompt, those the provider read from its prompt cache
// (CachedTokens) and wrote to it (CacheWriteTokens) included, as OpenAI
// and Gemini count them; Anthropic's three counts are added up to match.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedTokens are the input tokens read from the provider's prompt
	// cache (billed at its cached price).
	CachedTokens int `json:"cached_tokens,omitempty"`
	// CacheWriteTokens are the input tokens written to the prompt cache,
	// where the provider reports them (Anthropic).
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CachedTokens: u.CachedTokens + v.CachedTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens}
}

// Response is a model's answer: text, tool calls, or both.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// StopReason is the provider's reason for stopping, as it names it.
	StopReason string
	// Reasoning is the model's reasoning, for people, when the provider
	// returned it.
	Reasoning string
	// Thoughts are the reasoning blocks to send back with the answer's tool
	// calls (Message.Thoughts).
	Thoughts []Thought `json:",omitempty"`
}

// Provider is a language model.
type Provider interface {
	// Model names the model, e.g. "offline" or "anthropic:claude-sonnet-4-5".
	Model() string
	// Generate sends req and returns the model's answer. It returns when ctx
	// ends, with ctx's error.
	Generate(ctx context.Context, req Request) (*Response, error)
}
