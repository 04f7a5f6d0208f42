package a2a_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/a2a/a2atest"
)

// TestClientAgainstGoSDK drives the official Go SDK's server (a2a-go 0.3):
// card, message/send to completion, input-required then a continuation with
// the task id, tasks/get, and the headers the server receives.
func TestClientAgainstGoSDK(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Name: "resource-agent", Description: "Manages resources", Skills: []string{"list resources"}, Approvals: 1})
	c := &a2a.Client{}
	card, err := c.FetchCard(t.Context(), sub.URL)
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "resource-agent" || len(card.Skills) != 1 {
		t.Errorf("card = %+v", card)
	}
	ep := a2a.CardEndpoint(card, sub.URL)
	if ep != sub.URL+"/invoke" {
		t.Fatalf("endpoint = %s, want %s/invoke", ep, sub.URL)
	}
	hdr := http.Header{"Authorization": {"Bearer tok"}, "X-Session-ID": {"0a1b2c3d"}}
	res, err := c.SendMessage(t.Context(), ep, a2a.SendParams{Message: a2a.Message{MessageID: "m1", Parts: []a2a.Part{a2a.TextPart("add resource x")}}}, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Task == nil || res.Task.Status.State != a2a.StateInputRequired || !strings.Contains(res.Task.Status.Message.Text(), "Approve: add resource x?") {
		t.Fatalf("first answer = %+v, want an input-required task asking to approve", res)
	}
	taskID := res.Task.ID
	res, err = c.SendMessage(t.Context(), ep, a2a.SendParams{Message: a2a.Message{MessageID: "m2", TaskID: taskID, Parts: []a2a.Part{a2a.TextPart("approved")}}}, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Task == nil {
		t.Fatalf("continuation = %+v, want the completed task", res)
	}
	if res.Task.ID != taskID {
		t.Fatalf("continuation task id = %q, want the first answer's %q", res.Task.ID, taskID)
	}
	if res.Task.Status.State != a2a.StateCompleted {
		t.Fatalf("continuation state = %q, want %q", res.Task.Status.State, a2a.StateCompleted)
	}
	if got := res.Task.Text(); got != "done: add resource x" {
		t.Fatalf("continuation text = %q, want %q", got, "done: add resource x")
	}
	got, err := c.GetTask(t.Context(), ep, a2a.TaskQueryParams{ID: taskID}, nil)
	if err != nil || got.Status.State != a2a.StateCompleted {
		t.Fatalf("tasks/get = %+v, %v", got, err)
	}
	reqs := sub.Requests()
	// The headers go on the sends only.
	if len(reqs) != 3 {
		t.Fatalf("got %d requests, want 3: %+v", len(reqs), reqs)
	}
	if reqs[0].Authorization != "Bearer tok" {
		t.Errorf("first send's Authorization = %q, want %q", reqs[0].Authorization, "Bearer tok")
	}
	if reqs[0].SessionID != "0a1b2c3d" {
		t.Errorf("first send's session id = %q, want 0a1b2c3d", reqs[0].SessionID)
	}
	if reqs[2].HasAuth {
		t.Errorf("tasks/get carried an Authorization header: %+v", reqs[2])
	}

	// A JSON-RPC error is an *a2a.Error, and not transient.
	_, err = c.GetTask(t.Context(), ep, a2a.TaskQueryParams{ID: "no-such-task"}, nil)
	var rpc *a2a.Error
	if !errors.As(err, &rpc) || a2a.Transient(t.Context(), err) {
		t.Errorf("unknown task: %v (%T), want a JSON-RPC error that is not transient", err, err)
	}
}

func TestClientErrors(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{})
	c := &a2a.Client{}
	ep := sub.URL + "/invoke"
	send := func() error {
		_, err := c.SendMessage(t.Context(), ep, a2a.SendParams{Message: a2a.Message{MessageID: "m", Parts: []a2a.Part{a2a.TextPart("hi")}}}, nil)
		return err
	}
	sub.Fail(1, http.StatusServiceUnavailable)
	err := send()
	var se *a2a.StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 || !a2a.Transient(t.Context(), err) {
		t.Errorf("503: %v, want a transient *StatusError", err)
	}
	sub.Fail(1, http.StatusForbidden)
	if err := send(); !errors.As(err, &se) || se.StatusCode != 403 || a2a.Transient(t.Context(), err) {
		t.Errorf("403: %v, want a *StatusError that is not transient", err)
	}
	if err := send(); err != nil {
		t.Errorf("after the failures: %v", err)
	}

	// Nothing listening: transient.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	if _, err := c.FetchCard(t.Context(), dead.URL); err == nil || !a2a.Transient(t.Context(), err) {
		t.Errorf("dead card: %v, want a transient error", err)
	}
	// A card that is not there on either path.
	sub.HideCard(true)
	if _, err := c.FetchCard(t.Context(), sub.URL); !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("hidden card: %v, want HTTP 404", err)
	}
	// A cancelled call is not transient.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.FetchCard(ctx, dead.URL); a2a.Transient(ctx, err) {
		t.Errorf("cancelled: %v is transient", err)
	}
}

func TestCardEndpoint(t *testing.T) {
	tests := []struct {
		name string
		card *a2a.AgentCard
		want string
	}{
		{"nil", nil, "http://fallback"},
		{"url", &a2a.AgentCard{URL: "http://a/a2a"}, "http://a/a2a"},
		{"jsonrpc 0.3 interface", &a2a.AgentCard{URL: "http://a/grpc", PreferredTransport: "GRPC", SupportedInterfaces: []a2a.Interface{
			{URL: "http://a/v1", ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"},
			{URL: "http://a/v03", ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"},
		}}, "http://a/v03"},
		{"url preferred over 1.0 interface", &a2a.AgentCard{URL: "http://a/a2a", SupportedInterfaces: []a2a.Interface{{URL: "http://a/v1", ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"}}}, "http://a/a2a"},
		{"1.0 only", &a2a.AgentCard{SupportedInterfaces: []a2a.Interface{{URL: "http://a/v1", ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"}}}, "http://a/v1"},
		{"empty", &a2a.AgentCard{Name: "x"}, "http://fallback"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := a2a.CardEndpoint(tc.card, "http://fallback"); got != tc.want {
				t.Errorf("CardEndpoint = %s, want %s", got, tc.want)
			}
		})
	}
}
