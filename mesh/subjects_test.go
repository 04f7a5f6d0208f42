package mesh

import (
	"errors"
	"strings"
	"testing"
)

func TestNamespaceSubjects(t *testing.T) {
	ns, err := NewNamespace("")
	if err != nil {
		t.Fatal(err)
	}
	id := "0b6c2f0e-6a44-4a43-9d43-1f9f4f3e1d2a"
	tests := []struct {
		name    string
		build   func() (string, error)
		want    string
		wantErr bool
	}{
		{"event", func() (string, error) { return ns.Event(id, EventRunStarted) }, "mesh.evt." + id + ".RUN_STARTED", false},
		{"work", func() (string, error) { return ns.Work(RoleAgent, "resource-manager", id) }, "mesh.work.agent.resource-manager." + id, false},
		{"work filter", func() (string, error) { return ns.WorkFilter(RoleAgent, "resource-manager") }, "mesh.work.agent.resource-manager.*", false},
		{"work filter with a dot", func() (string, error) { return ns.WorkFilter(RoleAgent, "a.b") }, "", true},
		{"session with a dot", func() (string, error) { return ns.Work(RoleGroup, "desk", "a.b") }, "", true},
		{"tool", func() (string, error) { return ns.Tool("resources", "resources_add") }, "mesh.tool.resources.resources_add", false},
		{"tool with dots", func() (string, error) { return ns.Tool("fs", "read.file") }, "mesh.tool.fs.read=2efile", false},
		{"decide", func() (string, error) { return ns.ApprovalDecide(id) }, "mesh.approval." + id + ".decide", false},
		{"approval request", func() (string, error) { return ns.ApprovalRequest(id) }, "mesh.approval." + id + ".request", false},
		{"approval request with a dot", func() (string, error) { return ns.ApprovalRequest("a.b") }, "", true},
		{"cancel", func() (string, error) { return ns.SessionCancel(id) }, "mesh.session." + id + ".cancel", false},
		{"heartbeat", func() (string, error) { return ns.Heartbeat(RoleAgent, "n1") }, "mesh.hb.agent.n1", false},
		{"probe", func() (string, error) { return ns.Probe("n1") }, "mesh.node.n1.probe", false},
		{"wildcard in token", func() (string, error) { return ns.Event("*", EventRunStarted) }, "", true},
		{"dot in token", func() (string, error) { return ns.Work(RoleAgent, "a.b", id) }, "", true},
		{"gt in token", func() (string, error) { return ns.SessionCancel(">") }, "", true},
		{"space in token", func() (string, error) { return ns.ApprovalDecide("a b") }, "", true},
		{"empty token", func() (string, error) { return ns.Probe("") }, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.build()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("err = %v, want ErrInvalidToken", err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNamespaceNames(t *testing.T) {
	ns, err := NewNamespace("prod-eu")
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.Stream(StreamEvents); got != "PROD-EU_EVENTS" {
		t.Errorf("stream = %q", got)
	}
	if got := ns.Bucket(BucketSessions); got != "prod-eu_sessions" {
		t.Errorf("bucket = %q", got)
	}
	if got := DefaultNamespace().Stream(StreamWork); got != "MESH_WORK" {
		t.Errorf("default stream = %q", got)
	}
	if _, err := NewNamespace("a.b"); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("prefix with a dot: err = %v", err)
	}
}

func TestToolTokenRoundTrip(t *testing.T) {
	for _, name := range []string{"resources_list", "read.file", "a/b c", "x=y", "", "é", "get-item"} {
		tok := ToolToken(name)
		if err := CheckToken(tok); err != nil {
			t.Errorf("ToolToken(%q) = %q is not a token: %v", name, tok, err)
		}
		back, err := toolName(tok)
		if err != nil || back != name {
			t.Errorf("toolName(ToolToken(%q)) = %q, %v", name, back, err)
		}
	}
}

func FuzzSubjectBuilders(f *testing.F) {
	for _, s := range []string{"abc", "a.b", "*", ">", "a b", "", "x=y", "read.file", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		subj, err := DefaultNamespace().Work(RoleAgent, s, "c1")
		if err == nil {
			if strings.Count(subj, ".") != 4 || strings.ContainsAny(subj, "*> \t\r\n") {
				t.Fatalf("token %q built unsafe subject %q", s, subj)
			}
		}
		if subj, err := DefaultNamespace().ApprovalRequest(s); err == nil {
			if strings.Count(subj, ".") != 3 || strings.ContainsAny(subj, "*> \t\r\n") || !strings.HasSuffix(subj, ".request") {
				t.Fatalf("token %q built unsafe subject %q", s, subj)
			}
		}
		subj, err = DefaultNamespace().Work(RoleGroup, "desk", s)
		if err == nil {
			if strings.Count(subj, ".") != 4 || strings.ContainsAny(subj, "*> \t\r\n") {
				t.Fatalf("session %q built unsafe subject %q", s, subj)
			}
		}
		tok := ToolToken(s)
		if CheckToken(tok) != nil {
			t.Fatalf("ToolToken(%q) = %q is not a valid token", s, tok)
		}
		back, err := toolName(tok)
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %q, %v", s, back, err)
		}
	})
}
