package agui

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

func TestForwardedPropsFork(t *testing.T) {
	seq := uint64(42)
	for _, c := range []struct {
		name, props string
		want        *forkProps
		wantErr     string
	}{
		{name: "none", props: ``},
		{name: "other props only", props: `{"agent":"a"}`},
		{name: "fork null", props: `{"fork":null}`},
		{name: "before", props: `{"fork":{"from":"t0","before":"m1"}}`, want: &forkProps{From: "t0", Before: "m1"}},
		{name: "after", props: `{"fork":{"from":"t0","after":"m1"}}`, want: &forkProps{From: "t0", After: "m1"}},
		{name: "event_seq", props: `{"fork":{"from":"t0","event_seq":42}}`, want: &forkProps{From: "t0", EventSeq: &seq}},
		{name: "no point", props: `{"fork":{"from":"t0"}}`, wantErr: "names 0 points"},
		{name: "two points", props: `{"fork":{"from":"t0","before":"m1","after":"m2"}}`, wantErr: "names 2 points"},
		{name: "no from", props: `{"fork":{"after":"m1"}}`, wantErr: "forwardedProps.fork.from"},
		{name: "from with a dot", props: `{"fork":{"from":"a.b","after":"m1"}}`, wantErr: "forwardedProps.fork.from"},
		{name: "message id with a star", props: `{"fork":{"from":"t0","after":"m*"}}`, wantErr: "forwardedProps.fork.after"},
		{name: "unknown field", props: `{"fork":{"from":"t0","after":"m1","at":"m2"}}`, wantErr: "unknown field"},
		{name: "not an object", props: `{"fork":"t0"}`, wantErr: "forwardedProps.fork is"},
		{name: "negative event_seq", props: `{"fork":{"from":"t0","event_seq":-1}}`, wantErr: "forwardedProps.fork is"},
		{name: "from the thread itself", props: `{"fork":{"from":"t1","after":"m1"}}`, wantErr: "needs a new threadId"},
	} {
		thread := "t1"
		in := runAgentInput{ThreadID: &thread, ForwardedProps: json.RawMessage(c.props)}
		got, err := in.fork()
		switch {
		case c.wantErr != "":
			if err == nil || !errors.Is(err, mesh.ErrBadRequest) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: %+v, %v; want a bad request saying %q", c.name, got, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case (got == nil) != (c.want == nil):
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		case got != nil && (got.From != c.want.From || got.Before != c.want.Before || got.After != c.want.After || (got.EventSeq == nil) != (c.want.EventSeq == nil)):
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestStarterRefusesAForkWithATargetOrAnAction(t *testing.T) {
	h := &handler{}
	thread, run := "t1", "r1"
	for _, props := range []string{
		`{"fork":{"from":"t0","after":"m1"},"agent":"other"}`,
		`{"fork":{"from":"t0","after":"m1"},"group":"team"}`,
		`{"fork":{"from":"t0","after":"m1"},"action":"regenerate"}`,
	} {
		in := runAgentInput{ThreadID: &thread, RunID: &run, Messages: []inputMessage{{ID: "u", Role: "user", Content: json.RawMessage(`"hi"`)}}, ForwardedProps: json.RawMessage(props)}
		if _, _, err := h.starter(t.Context(), &in, core.Caller{}); err == nil || !errors.Is(err, mesh.ErrBadRequest) {
			t.Errorf("forwardedProps %s: %v, want a bad request", props, err)
		}
	}
}
