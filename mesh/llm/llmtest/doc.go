// Package llmtest is a test double of the cloud LLM APIs: local HTTP servers
// that speak the wire format of the Gemini API, the Anthropic Messages API
// and OpenAI Chat Completions, answered by any [llm.Provider] (the offline
// planner by default). It is for tests and local runs only; it is not a
// model and not a proxy to the real services.
//
// # Quick start
//
//	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, APIKey: "test-key"})
//	// point the client under test at it, e.g. `mesh up` with
//	//   OPENAI_API_KEY=test-key OPENAI_BASE_URL=<srv.BaseURL()>
//	...
//	for _, r := range srv.Requests() {
//		// r.Request is what the client sent, as an llm.Request
//	}
//
// Pointed at by the real clients:
//
//	client (llm provider, SDK, mesh up)
//	   │  POST /v1/chat/completions        (OpenAI:    base URL = srv.BaseURL() = srv.URL+"/v1")
//	   │  POST /v1/messages                (Anthropic: base URL = srv.URL)
//	   │  POST /v1beta/models/{m}:…Content (Gemini:    base URL = srv.URL)
//	   ▼
//	Server ── validates path, key, headers, JSON ──▶ 4xx in the API's error format
//	   │  decodes into llm.Request, records it (Requests)
//	   │  serves a scripted Fault, if one is queued (Fail)
//	   ▼
//	Config.Backend.Generate ── OnText deltas streamed as the API frames them
//	   │
//	   ▼  text, tool calls (parallel ones too), usage, in the API's JSON or SSE
//
// # What is checked
//
// Each server refuses what the real API refuses, with its status and error
// body: unknown paths (404), a missing or wrong key (OpenAI and Anthropic
// 401; Gemini 403 without a key, 400 with a wrong one), a missing or unknown
// anthropic-version (400), a body that is not JSON, unknown fields (all
// three APIs reject them), missing required fields, malformed tool
// declarations (function names over 64 characters or with characters the
// API refuses, input schemas that are not object schemas, JSON Schema
// keywords outside Gemini's OpenAPI subset), and broken tool call pairing
// (a tool result that answers no call, a call left without its result,
// Anthropic tool_result blocks after text, Gemini function response counts).
// For reasoning models (o1…, o3…, o4…, gpt-5…) the OpenAI server refuses
// max_tokens as OpenAI does. For Gemini 3 models it attaches thought
// signatures to function calls and requires them back, as Gemini does.
//
// # What is answered
//
// The backend's text, tool calls and usage, in the API's shape: whole JSON
// answers, or server-sent events when the client asks for a stream
// (OpenAI stream: true, ending in data: [DONE], with a usage chunk when
// stream_options.include_usage is set; Anthropic's message_start,
// content_block_*, message_delta and message_stop events; Gemini's
// streamGenerateContent?alt=sse chunks). Text is streamed as the backend
// passes it to OnText. Call ids are made up the way each API shapes them.
// In Anthropic streams message_start carries an estimate of the input
// tokens (the backend's count is known only at the end); message_delta
// carries the backend's counts.
//
// With [Config].Reasoning the model reasons before each answer, in the
// API's form and only when the request asks for it as that API wants:
// Anthropic thinking blocks (thinking enabled; signed by the server, and a
// tool use loop that does not send them back unchanged is refused),
// Gemini thought parts (includeThoughts), and OpenAI-compatible
// reasoning_content (always). A schema asked for (OpenAI response_format,
// Gemini responseJsonSchema, a tool forced by Anthropic's tool_choice) is
// in the recorded request's Output; under a forced tool the backend's text
// becomes that tool's call, as the API answers.
//
// A backend error becomes the API's error answer: 429 for a rate limit, else
// the provider error's status, else 500; in a stream already started, the
// API's in-stream error event.
//
// # Faults
//
// [Server.Fail] queues faults served instead of answers, in order: an HTTP
// status with the API's error body and its way of saying when to retry
// (Retry-After and retry-after-ms headers, Gemini's RetryInfo), or other
// headers the test gives; a body of the test's own making; a reset
// connection, a request held until the client gives up, a malformed
// answer, a stream cut in the middle, ended early, or held, after the
// event that holds a given text. A fault with Times < 0 repeats until
// [Server.Recover].
//
// # Contract tests
//
// The tests of this package are the contract every cloud provider of
// mesh/llm keeps (Gemini, Gemini 3, Anthropic, OpenAI and Ollama, through
// llm.NewCloud): text, one call, parallel calls, text with a call, tool
// results sent back natively, streaming and usage, whole and streamed.
// The faults above are played to the OpenAI, Anthropic and Gemini
// clients, and the offline planner answers through every API.
// Read ExampleNew, and mesh/llm's ExampleNewCloud.
//
// # Lifecycle
//
// [New] starts a server on 127.0.0.1 at a random port; [Server.Close] stops
// it, ending held requests and backend calls, and waits for its handlers.
// [Start] is New for a test, closed by t.Cleanup. Servers are safe for
// concurrent use; each request runs the backend on its handler goroutine.
package llmtest
