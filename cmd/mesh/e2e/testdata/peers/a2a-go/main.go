// Command a2a-go drives a mesh with the official Go A2A client
// (github.com/a2aproject/a2a-go v0.3.3, A2A 0.3) and prints what happened as
// one JSON object on stdout; cmd/mesh/e2e/a2a_server_test.go runs it and
// asserts on the result. The SDK checks what it reads: a card it cannot
// use, a result or event it cannot decode, an error code it does not know
// are failures reported under "error".
//
// Environment: A2A_BASE (http://host:port of the mesh's bridge), A2A_TOKEN
// and A2A_SID (sent as Authorization and X-Session-ID when set), and
// A2A_CANCEL ("1": also cancel a task that works on the gated items tool).
//
// Scenario:
//
//	card:      resolve /.well-known/agent-card.json, connect by its url and preferredTransport
//	send:      "list all resources" (blocking) → completed task with the reply as artifact
//	get:       tasks/get of that task
//	approval:  "add resource go-peer with value 5" → input-required; the same task with
//	           "approved" → completed
//	stream:    message/stream "list all resources" → the events, the last one final
//	resub:     tasks/resubscribe of the finished task
//	cancel:    "list items" without blocking → working; tasks/cancel → canceled; again → not cancelable
//	notFound:  tasks/get of an unknown task → task not found
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

// headers adds the caller's credentials and trace id to every call.
type headers struct {
	a2aclient.PassthroughInterceptor
	token, sid string
}

func (h headers) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	if h.token != "" {
		req.Meta["Authorization"] = []string{h.token}
	}
	if h.sid != "" {
		req.Meta["X-Session-ID"] = []string{h.sid}
	}
	return ctx, nil
}

type taskInfo struct {
	ID         string   `json:"id"`
	ContextID  string   `json:"contextId"`
	State      string   `json:"state"`
	Artifact   string   `json:"artifact,omitempty"`
	Artifacts  int      `json:"artifacts"`
	History    int      `json:"history"`
	StatusText string   `json:"statusText,omitempty"`
	Approval   string   `json:"approval,omitempty"`
	Events     []string `json:"events,omitempty"`
}

type result struct {
	Card struct {
		Name               string   `json:"name"`
		URL                string   `json:"url"`
		PreferredTransport string   `json:"preferredTransport"`
		ProtocolVersion    string   `json:"protocolVersion"`
		Streaming          bool     `json:"streaming"`
		Skills             []string `json:"skills"`
	} `json:"card"`
	Send             *taskInfo `json:"send,omitempty"`
	Get              *taskInfo `json:"get,omitempty"`
	Paused           *taskInfo `json:"paused,omitempty"`
	Approved         *taskInfo `json:"approved,omitempty"`
	Stream           *taskInfo `json:"stream,omitempty"`
	Resub            *taskInfo `json:"resub,omitempty"`
	Working          *taskInfo `json:"working,omitempty"`
	Canceled         *taskInfo `json:"canceled,omitempty"`
	CancelAgain      string    `json:"cancelAgain,omitempty"`
	CancelAgainCoded bool      `json:"cancelAgainNotCancelable"`
	NotFound         string    `json:"notFound,omitempty"`
	NotFoundCoded    bool      `json:"notFoundIsTaskNotFound"`
	Error            string    `json:"error,omitempty"`
}

func main() {
	var res result
	err := run(&res)
	if err != nil {
		res.Error = err.Error()
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}

func info(t *a2a.Task) *taskInfo {
	ti := &taskInfo{ID: string(t.ID), ContextID: t.ContextID, State: string(t.Status.State), Artifacts: len(t.Artifacts), History: len(t.History)}
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				ti.Artifact += tp.Text
			}
		}
	}
	if m := t.Status.Message; m != nil {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case a2a.TextPart:
				ti.StatusText += p.Text
			case a2a.DataPart:
				if ap, ok := p.Data["approval"].(map[string]any); ok {
					ti.Approval, _ = ap["uuid"].(string)
				}
			}
		}
	}
	return ti
}

func text(s string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: s})}
}

func asTask(r a2a.SendMessageResult, err error) (*a2a.Task, error) {
	if err != nil {
		return nil, err
	}
	t, ok := r.(*a2a.Task)
	if !ok {
		return nil, fmt.Errorf("result is a %T, want a task", r)
	}
	return t, nil
}

func run(res *result) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := os.Getenv("A2A_BASE")
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil {
		return fmt.Errorf("resolve card: %w", err)
	}
	res.Card.Name, res.Card.URL, res.Card.PreferredTransport = card.Name, card.URL, string(card.PreferredTransport)
	res.Card.ProtocolVersion, res.Card.Streaming = card.ProtocolVersion, card.Capabilities.Streaming
	for _, s := range card.Skills {
		res.Card.Skills = append(res.Card.Skills, s.ID)
	}
	hdr := a2aclient.WithInterceptors(headers{token: os.Getenv("A2A_TOKEN"), sid: os.Getenv("A2A_SID")})
	client, err := a2aclient.NewFromCard(ctx, card, hdr)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}

	t, err := asTask(client.SendMessage(ctx, text("list all resources")))
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	res.Send = info(t)
	got, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: t.ID})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	res.Get = info(got)

	paused, err := asTask(client.SendMessage(ctx, text("add resource go-peer with value 5")))
	if err != nil {
		return fmt.Errorf("send add: %w", err)
	}
	res.Paused = info(paused)
	approved, err := asTask(client.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, paused, a2a.TextPart{Text: "approved"})}))
	if err != nil {
		return fmt.Errorf("send approved: %w", err)
	}
	res.Approved = info(approved)

	var streamed *a2a.Task
	var events []string
	for ev, err := range client.SendStreamingMessage(ctx, text("list all resources")) {
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			streamed = ev
			events = append(events, "task:"+string(ev.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			e := "status-update:" + string(ev.Status.State)
			if ev.Final {
				e += ":final"
			}
			events = append(events, e)
		case *a2a.TaskArtifactUpdateEvent:
			events = append(events, "artifact-update")
		case *a2a.Message:
			events = append(events, "message")
		}
	}
	if streamed == nil {
		return errors.New("stream: no task event")
	}
	res.Stream = &taskInfo{ID: string(streamed.ID), Events: events}
	after, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: streamed.ID})
	if err != nil {
		return fmt.Errorf("get streamed: %w", err)
	}
	res.Stream.State, res.Stream.Artifact = string(after.Status.State), info(after).Artifact

	res.Resub = &taskInfo{ID: string(streamed.ID)}
	for ev, err := range client.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: streamed.ID}) {
		if err != nil {
			return fmt.Errorf("resubscribe: %w", err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			res.Resub.Events = append(res.Resub.Events, "task:"+string(ev.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			res.Resub.Events = append(res.Resub.Events, fmt.Sprintf("status-update:%s:%v", ev.Status.State, ev.Final))
		}
	}

	if os.Getenv("A2A_CANCEL") == "1" {
		polling, err := a2aclient.NewFromCard(ctx, card, hdr, a2aclient.WithConfig(a2aclient.Config{Polling: true}))
		if err != nil {
			return fmt.Errorf("polling client: %w", err)
		}
		working, err := asTask(polling.SendMessage(ctx, text("list items")))
		if err != nil {
			return fmt.Errorf("send list items: %w", err)
		}
		res.Working = info(working)
		// Cancel once a turn holds the task (its tool call blocks).
		for !claimed(ctx, client, working.ID) {
			select {
			case <-ctx.Done():
				return errors.New("the task never started working")
			case <-time.After(50 * time.Millisecond):
			}
		}
		canceled, err := client.CancelTask(ctx, &a2a.TaskIDParams{ID: working.ID})
		if err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
		res.Canceled = info(canceled)
		_, err = client.CancelTask(ctx, &a2a.TaskIDParams{ID: working.ID})
		if err != nil {
			res.CancelAgain, res.CancelAgainCoded = err.Error(), errors.Is(err, a2a.ErrTaskNotCancelable)
		}
	}

	_, err = client.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"})
	if err != nil {
		res.NotFound, res.NotFoundCoded = err.Error(), errors.Is(err, a2a.ErrTaskNotFound)
	}
	return nil
}

// claimed reports whether tasks/get sees the task working.
func claimed(ctx context.Context, c *a2aclient.Client, id a2a.TaskID) bool {
	t, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	return err == nil && t.Status.State == a2a.TaskStateWorking
}
