package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// answers scripts a step's model calls in order (the last again when they
// are used up), recording the requests.
type answers struct {
	mu    sync.Mutex
	texts []string
	reqs  []llm.Request
}

func (a *answers) script(_ context.Context, req llm.Request) (*llm.Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, req)
	return &llm.Response{Text: a.texts[min(len(a.reqs), len(a.texts))-1]}, nil
}

func (a *answers) requests() []llm.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.reqs)
}

const placeTree = `  name: pipeline
  type: sequential
  agents:
    - name: extractor
      type: llm
      prompt: Extract the place
      output_key: place
      output_schema:
        type: object
        properties:
          city: {type: string}
          days: {type: integer, minimum: 1}
        required: [city]
    - {name: planner, type: llm, prompt: "Plan for {place}"}
`

func TestTreeStepOutputSchemaStoresTheObject(t *testing.T) {
	ex := &answers{texts: []string{"```json\n{\"city\": \"Paris\", \"days\": 2}\n```"}}
	var plannerSystem string
	var mu sync.Mutex
	p := byPrompt{
		"Extract the place": ex.script,
		"Plan for": func(_ context.Context, req llm.Request) (*llm.Response, error) {
			mu.Lock()
			plannerSystem = req.System
			mu.Unlock()
			return &llm.Response{Text: "planned"}, nil
		},
	}
	f := newTreeFixture(t, p, treeYAML(placeTree), nil)
	_, c := f.turn(f.conversation(), "two days in Paris")

	place, ok := c.State["place"].(map[string]any)
	if !ok || place["city"] != "Paris" || place["days"] != float64(2) {
		t.Fatalf("state place = %#v, want the object {city: Paris, days: 2}", c.State["place"])
	}
	reqs := ex.requests()
	if len(reqs) != 1 || reqs[0].Output == nil || reqs[0].Output.Name != "extractor" || !strings.Contains(string(reqs[0].Output.Schema), `"required":["city"]`) {
		t.Fatalf("extractor's requests %+v: want one, asking for the schema", reqs)
	}
	mu.Lock()
	defer mu.Unlock()
	if plannerSystem != `Plan for {"city":"Paris","days":2}` {
		t.Errorf("planner's prompt %q, want the object as JSON", plannerSystem)
	}
	if c.LastRun == nil || c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Errorf("last run %+v, want success", c.LastRun)
	}
}

func TestTreeStepOutputSchemaRetriesOnce(t *testing.T) {
	ex := &answers{texts: []string{"Paris, I think.", `{"city":"Paris"}`}}
	f := newTreeFixture(t, byPrompt{"Extract the place": ex.script, "Plan for": text("planned")}, treeYAML(placeTree), nil)
	_, c := f.turn(f.conversation(), "Paris")

	if place, _ := c.State["place"].(map[string]any); place["city"] != "Paris" {
		t.Fatalf("state place = %#v, want the retried answer's object", c.State["place"])
	}
	reqs := ex.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d calls, want the answer and one retry", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != llm.RoleUser || !strings.Contains(last.Content, "not one JSON object") {
		t.Errorf("retry ends with %+v, want the user message saying what was wrong", last)
	}
}

func TestTreeStepOutputSchemaInvalidFailsTheStep(t *testing.T) {
	ex := &answers{texts: []string{`{"days": 0}`}}
	f := newTreeFixture(t, byPrompt{"Extract the place": ex.script, "Plan for": text("planned")}, treeYAML(placeTree), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "somewhere")

	if n := len(ex.requests()); n != 2 {
		t.Errorf("%d calls, want 2: one retry at most", n)
	}
	if _, ok := c.State["place"]; ok {
		t.Errorf("state place = %v, want none", c.State["place"])
	}
	if c.LastRun == nil || c.LastRun.Outcome != mesh.OutcomeError || c.LastRun.ErrorCode != mesh.CodeOutputInvalid {
		t.Fatalf("last run %+v, want an error OUTPUT_INVALID", c.LastRun)
	}
	if !strings.Contains(c.LastRun.Error, "step extractor") || !strings.Contains(c.LastRun.Error, "does not match the output schema") {
		t.Errorf("error %q, want it to name the step and the schema", c.LastRun.Error)
	}
	var code string
	for _, e := range f.events(conv) {
		if e.Type == mesh.EventRunError {
			code = e.Code
		}
	}
	if code != mesh.CodeOutputInvalid {
		t.Errorf("RUN_ERROR code %q, want OUTPUT_INVALID", code)
	}
}

// TestReasoningEventsAndThoughts: a model's reasoning is published as a
// reasoning span before the text, stored on the message for people, and its
// signed thoughts go back to the model with the message's calls.
func TestReasoningEventsAndThoughts(t *testing.T) {
	var mu sync.Mutex
	var second llm.Request
	calls := 0
	p := script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			req.OnReasoning("I should ")
			req.OnReasoning("list them.")
			return &llm.Response{ToolCalls: []llm.ToolCall{call("safe", `{}`)}, Reasoning: "I should list them.",
				Thoughts: []llm.Thought{{Text: "I should list them.", Signature: "sig-1"}}}, nil
		}
		second = req
		req.OnText("Done.")
		return &llm.Response{Text: "Done."}, nil
	})
	f := newFixture(t, p, nil)
	conv := f.conversation()
	_, c := f.turn(conv, "list")

	got := types(f.events(conv), mesh.EventReasoningStart, mesh.EventReasoningMessageStart, mesh.EventReasoningMessageContent,
		mesh.EventReasoningMessageEnd, mesh.EventReasoningEnd, mesh.EventTextMessageStart, mesh.EventToolCallStart)
	want := []string{"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT",
		"REASONING_MESSAGE_END", "REASONING_END", "TOOL_CALL_START", "TEXT_MESSAGE_START"}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	var withCalls *mesh.Message
	for i := range c.Messages {
		if len(c.Messages[i].ToolCalls) > 0 {
			withCalls = &c.Messages[i]
		}
	}
	if withCalls == nil || withCalls.Reasoning != "I should list them." || len(withCalls.Thoughts) != 1 || withCalls.Thoughts[0].Signature != "sig-1" {
		t.Fatalf("message with calls %+v, want its reasoning and thoughts stored", withCalls)
	}
	mu.Lock()
	defer mu.Unlock()
	var sent []llm.Thought
	for _, m := range second.Messages {
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			sent = m.Thoughts
		}
	}
	if len(sent) != 1 || sent[0] != (llm.Thought{Text: "I should list them.", Signature: "sig-1"}) {
		t.Errorf("thoughts sent back %+v, want the signed block unchanged", sent)
	}
}
