package agui

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
)

func TestForwardedPropsAction(t *testing.T) {
	for _, c := range []struct {
		name, props string
		want        actionProps
		wantErr     bool
	}{
		{"none", ``, actionProps{}, false},
		{"other props only", `{"agent":"a"}`, actionProps{}, false},
		{"regenerate", `{"action":"regenerate"}`, actionProps{Action: "regenerate"}, false},
		{"feedback", `{"action":"feedback","messageId":"m1","rating":"like","comment":"ok"}`, actionProps{Action: "feedback", MessageID: "m1", Rating: "like", Comment: "ok"}, false},
		{"unknown action", `{"action":"delete"}`, actionProps{}, true},
		{"action not a string", `{"action":1}`, actionProps{}, true},
		{"feedback field of the wrong type", `{"action":"feedback","rating":1}`, actionProps{}, true},
	} {
		in := runAgentInput{ForwardedProps: json.RawMessage(c.props)}
		got, err := in.action()
		if (err != nil) != c.wantErr || (err == nil && got != c.want) {
			t.Errorf("%s: %+v, %v; want %+v, error %v", c.name, got, err, c.want, c.wantErr)
		}
		if err != nil && !errors.Is(err, mesh.ErrBadRequest) {
			t.Errorf("%s: %v is not a bad request", c.name, err)
		}
	}
	// Messages may be left out of a run that is an action.
	thread, run := "t1", "r1"
	in := runAgentInput{ThreadID: &thread, RunID: &run, ForwardedProps: json.RawMessage(`{"action":"regenerate"}`)}
	if err := in.validate(); err != nil {
		t.Errorf("a regenerate without messages: %v", err)
	}
	in.ForwardedProps = nil
	if err := in.validate(); err == nil {
		t.Error("a run without messages, resume or action was accepted")
	}
}

// The dotted dialect's form of CUSTOM feedback: message.feedback.
func TestDottedFeedback(t *testing.T) {
	tr := newDottedTranslator("r1")
	ev := mesh.Custom(mesh.CustomFeedback, map[string]any{"messageId": "m1", "rating": "dislike", "comment": "no", "by": "ursula"})
	out := tr.translate(&ev)
	if len(out) != 1 || out[0].Type != "message.feedback" || out[0].MessageID != "m1" {
		t.Fatalf("dotted events %+v, want one message.feedback of m1", out)
	}
	fb, _ := out[0].Feedback.(map[string]any)
	for _, c := range []struct{ key, want string }{{"rating", "dislike"}, {"comment", "no"}, {"by", "ursula"}} {
		if fb[c.key] != c.want {
			t.Errorf("feedback %s = %v, want %q", c.key, fb[c.key], c.want)
		}
	}
	if fb["messageId"] != nil {
		t.Errorf("feedback carries messageId %v, want it on the event alone", fb["messageId"])
	}
}
