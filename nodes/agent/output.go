package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds the structured output of a tree step with an
// output_schema: the model is asked for one JSON object matching it
// (llm.Request.Output, in each provider's own way), the final answer is
// validated, and an answer that does not match is sent back once with what
// is wrong; a second one fails the step with OUTPUT_INVALID. The step's
// output_key then holds the object, not its text.

// stepOutput is the schema a step answers with.
type stepOutput struct {
	request  *llm.Output
	resolved *jsonschema.Resolved
}

// newStepOutput reads a node's output_schema; nil when it has none.
func newStepOutput(n *config.Node) (*stepOutput, error) {
	if n.OutputSchema == nil {
		return nil, nil
	}
	resolved, err := config.ResolveOutputSchema(n.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("agent: node %q: output_schema %w", n.Name, err)
	}
	raw, err := json.Marshal(n.OutputSchema)
	if err != nil {
		return nil, err
	}
	return &stepOutput{request: &llm.Output{Name: n.Name, Schema: raw}, resolved: resolved}, nil
}

// check returns the answer's object as compact JSON, or what is wrong
// with it. A code fence around the object is taken off: models add one
// though asked not to.
func (o *stepOutput) check(answer string) (string, error) {
	text := strings.TrimSpace(answer)
	if rest, ok := strings.CutPrefix(text, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return "", fmt.Errorf("the answer is not one JSON object: %s", clipText(answer, 200))
	}
	if _, ok := v.(map[string]any); !ok {
		return "", fmt.Errorf("the answer is JSON but not an object: %s", clipText(answer, 200))
	}
	// The validator reads numbers as float64, as json.Unmarshal gives them.
	var plain any
	_ = json.Unmarshal([]byte(text), &plain)
	if err := o.resolved.Validate(plain); err != nil {
		return "", fmt.Errorf("the answer does not match the output schema: %v", err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// outputRetry is the user message that sends an invalid answer back.
func outputRetry(problem error) llm.Message {
	return llm.Message{Role: llm.RoleUser, Content: "Your answer cannot be used: " + problem.Error() +
		". Answer again with only the JSON object that matches the schema."}
}

// outputValue is what output_key holds for a step's output: the object
// when the step answers with a schema, else the text.
func outputValue(s *step, output string) any {
	if s.output == nil {
		return output
	}
	var v any
	if json.Unmarshal([]byte(output), &v) != nil {
		return output
	}
	return v
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
