package a2a

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestNegotiateVersion(t *testing.T) {
	for _, tt := range []struct {
		header, want string
		ok           bool
	}{
		{"", Version03, true},
		{" ", Version03, true},
		{"0.3", Version03, true},
		{"0.3.0", Version03, true},
		{"1.0", Version10, true},
		{"1.0.1", Version10, true},
		{"1.1", "", false},
		{"2.0", "", false},
		{"1", "", false},
		{"latest", "", false},
	} {
		got, ok := NegotiateVersion(tt.header)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NegotiateVersion(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTaskStateV1(t *testing.T) {
	for _, s := range []TaskState{StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateCanceled, StateFailed, StateRejected, StateAuthRequired} {
		name := s.V1()
		if !strings.HasPrefix(name, "TASK_STATE_") || strings.ContainsAny(name, "-abcdefghijklmnopqrstuvwxyz") {
			t.Errorf("%s.V1() = %q", s, name)
		}
		if back, ok := TaskStateFromV1(name); !ok || back != s {
			t.Errorf("TaskStateFromV1(%q) = %q, %v; want %q", name, back, ok, s)
		}
	}
	if StateInputRequired.V1() != "TASK_STATE_INPUT_REQUIRED" || StateUnknown.V1() != "TASK_STATE_UNSPECIFIED" {
		t.Errorf("input-required → %s, unknown → %s", StateInputRequired.V1(), StateUnknown.V1())
	}
	for _, bad := range []string{"TASK_STATE_UNSPECIFIED", "TASK_STATE_RUNNING", "completed", "UNRECOGNIZED", ""} {
		if _, ok := TaskStateFromV1(bad); ok {
			t.Errorf("TaskStateFromV1(%q) accepted", bad)
		}
	}
}

func TestPartFromV1(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     Part
		wantErr  bool
	}{
		{name: "text", in: `{"text":"hi"}`, want: Part{Kind: "text", Text: "hi"}},
		{name: "empty text", in: `{"text":""}`, want: Part{Kind: "text"}},
		{name: "data object", in: `{"data":{"approved":true}}`, want: Part{Kind: "data", Data: map[string]any{"approved": true}}},
		{name: "data scalar", in: `{"data":[1,2]}`, want: Part{Kind: "data", Data: map[string]any{"value": []any{1.0, 2.0}}}},
		{name: "url", in: `{"url":"https://x/f.pdf","mediaType":"application/pdf","filename":"f.pdf"}`, want: Part{Kind: "file", File: &File{Name: "f.pdf", MimeType: "application/pdf", URI: "https://x/f.pdf"}}},
		{name: "raw", in: `{"raw":"aGk="}`, want: Part{Kind: "file", File: &File{Bytes: "aGk="}}},
		{name: "raw not base64", in: `{"raw":"%%%"}`, wantErr: true},
		{name: "nothing", in: `{"kind":"text"}`, wantErr: true},
	} {
		var p PartV1
		if err := json.Unmarshal([]byte(tt.in), &p); err != nil {
			t.Fatal(err)
		}
		got, err := PartFromV1(p)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if g, w, _ := jsonPair(got, tt.want); !tt.wantErr && g != w {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestMessageFromV1(t *testing.T) {
	m, err := MessageFromV1(&MessageV1{MessageID: "m", Role: RoleUserV1, TaskID: "t", Parts: []PartV1{TextPartV1("approved")}})
	if err != nil {
		t.Fatalf("MessageFromV1: %v", err)
	}
	if m.Kind != KindMessage {
		t.Errorf("MessageFromV1 kind = %q, want %q", m.Kind, KindMessage)
	}
	if m.Role != RoleUser {
		t.Errorf("MessageFromV1 role = %q, want %q", m.Role, RoleUser)
	}
	if m.TaskID != "t" {
		t.Errorf("MessageFromV1 task id = %q, want t", m.TaskID)
	}
	if got := m.Text(); got != "approved" {
		t.Errorf("MessageFromV1 text = %q, want approved", got)
	}
	for _, role := range []string{"user", "", "ROLE_UNSPECIFIED"} {
		if _, err := MessageFromV1(&MessageV1{MessageID: "m", Role: role}); err == nil {
			t.Errorf("role %q accepted", role)
		}
	}
}

func TestTaskV1Shape(t *testing.T) {
	task := &Task{
		Kind: KindTask, ID: "t1", ContextID: "t1",
		Status: TaskStatus{State: StateInputRequired, Message: &Message{
			Kind: KindMessage, MessageID: "s", Role: RoleAgent,
			Parts: []Part{TextPart("approve?"), DataPart(map[string]any{"approval": map[string]any{"uuid": "u"}})},
		}},
		Artifacts: []Artifact{{ArtifactID: "a", Parts: []Part{TextPart("")}}},
	}
	data, err := json.Marshal(task.V1())
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	want := `{"id":"t1","contextId":"t1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"s","role":"ROLE_AGENT","parts":[{"text":"approve?"},{"data":{"approval":{"uuid":"u"}}}]}},"artifacts":[{"artifactId":"a","parts":[{"text":""}]}]}`
	if got != want {
		t.Errorf("Task.V1 =\n%s\nwant\n%s", got, want)
	}
	up, _ := json.Marshal(StreamResponseV1{StatusUpdate: StatusUpdate{Kind: KindStatusUpdate, TaskID: "t1", ContextID: "t1", Status: TaskStatus{State: StateCompleted}, Final: true}.V1()})
	if string(up) != `{"statusUpdate":{"taskId":"t1","contextId":"t1","status":{"state":"TASK_STATE_COMPLETED"}}}` {
		t.Errorf("status update = %s", up)
	}
}

// A 0.3 task, as the mesh builds it, written in the shape of 1.0.
func ExampleTask_V1() {
	task := &Task{Kind: KindTask, ID: "t1", ContextID: "t1", Status: TaskStatus{State: StateCompleted},
		Artifacts: []Artifact{{ArtifactID: "reply", Parts: []Part{TextPart("Found 1 resource")}}}}
	out, _ := json.Marshal(SendMessageResponseV1{Task: task.V1()})
	fmt.Println(string(out))
	// Output:
	// {"task":{"id":"t1","contextId":"t1","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"reply","parts":[{"text":"Found 1 resource"}]}]}}
}

func jsonPair(a, b any) (string, string, error) {
	x, err := json.Marshal(a)
	if err != nil {
		return "", "", err
	}
	y, err := json.Marshal(b)
	return string(x), string(y), err
}
