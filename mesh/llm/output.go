package llm

import (
	"encoding/json"
	"strings"
)

// This file asks for structured output. Each API has its own way:
//
//   - OpenAI: response_format {type: json_schema, json_schema: {name,
//     schema, strict: false}}. Strict mode would refuse any schema with an
//     optional property; the caller validates the answer anyway.
//   - Gemini: responseMimeType application/json and responseJsonSchema,
//     when the call offers no tools (models before Gemini 3 refuse a
//     response schema with function calling); else the instruction below.
//   - Anthropic: a tool whose input_schema is the schema, forced with
//     tool_choice, whose input is the answer; when the call offers other
//     tools or thinks (thinking refuses a forced tool), the instruction.
//
// The instruction, appended to the system prompt, names the schema.

// defaultOutputName names a schema given none.
const defaultOutputName = "answer"

// name is the schema's name as the APIs take it.
func (o *Output) name() string {
	if o.Name == "" {
		return defaultOutputName
	}
	return anthropicID(o.Name)
}

// outputInstruction is the system prompt's addition for a provider that
// cannot ask for o natively in this call.
func outputInstruction(system string, o *Output) string {
	var b strings.Builder
	b.WriteString(system)
	if system != "" {
		b.WriteString("\n\n")
	}
	b.WriteString("When you give your final answer, answer with one JSON object and nothing else (no prose, no code fence), matching this JSON Schema:\n")
	b.Write(compactJSON(o.Schema))
	return b.String()
}

// compactJSON is raw without insignificant space, or raw when it is not JSON.
func compactJSON(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}
