package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
)

// summarySeeds are heads as the bucket holds them, and oddities.
func summarySeeds() []string {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	c := &mesh.Conversation{ID: "c1", SessionID: "0123abcd", Agent: "a", Owner: "o <&> é", Status: mesh.StatusRunning, Title: "t \"q\" \\ \u2028",
		MessageCount: 9, MessageTail: mesh.MessageTail{{Seq: 4, Bytes: 3}}, RecentTurns: []string{"r1", "r}2"},
		PendingApproval: &mesh.PendingApproval{UUID: "u", ToolName: "delete", ToolArgs: map[string]any{"k": []any{"]", "}"}}},
		Queued:          &mesh.QueuedTurn{ID: "q", Message: "m {", At: at, By: "b"},
		Group:           &mesh.GroupRun{Name: "g", Recent: []string{"x"}},
		LastRun:         &mesh.RunSummary{ID: "r1", Response: "done \"}\""},
		State:           map[string]any{"k": 1.5, "n": nil, "b": true},
		ForkedFrom:      &mesh.ForkPoint{Conversation: "o", Message: "m \"}\"", EventSeq: 7},
		CreatedAt:       at, UpdatedAt: at.Add(time.Hour), DeletedAt: &at, DeletedBy: "d", Version: 3}
	full, _ := json.Marshal(headOf(c))
	old, _ := json.Marshal(&mesh.Conversation{ID: "c2", Status: mesh.StatusActive, Messages: []mesh.Message{{ID: "u", Role: mesh.RoleUser, Content: "hi"}}})
	return []string{
		string(full), string(old),
		`{}`, ` { "id" : "x" , "message_count" : 3 } `, `{"id":null,"message_count":null,"created_at":null,"deleted_at":null,"queued_turn":null}`,
		`{"ID":"upper","id":"lower"}`, `{"id":"a","id":"b"}`, `{"message_count":1.5}`, `{"message_count":"3"}`, `{"created_at":"not a time"}`,
		`{"title":"\u00e9\ud83d\ude00","owner":"\\\"","id":"` + strings.Repeat("é", 3) + `"}`, `{"i\u0064":"escaped key"}`, `{"ſtatus":"fold"}`,
		`{"queued_turn":{"id":"a"},"queued_turn":{"message":"m"}}`, `{"x":[1,{"y":"]}"},"\"",[]],"id":"after"}`, `[1]`, `"s"`, `null`, `{"id":1}`,
	}
}

// TestScanSummary: of valid JSON, the scan gives what encoding/json gives,
// error or not.
func TestScanSummary(t *testing.T) {
	for _, s := range summarySeeds() {
		checkScanSummary(t, []byte(s))
	}
}

func FuzzScanSummary(f *testing.F) {
	for _, s := range summarySeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScanSummary)
}

func checkScanSummary(t *testing.T, data []byte) {
	if !json.Valid(data) {
		if _, err := SummaryOf(data); err == nil {
			t.Fatalf("%q: no error for JSON that is not valid", data)
		}
		return
	}
	var want summaryHead
	wantErr := json.Unmarshal(data, &want)
	got, err := SummaryOf(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, encoding/json's %v", data, err, wantErr)
	}
	if err != nil {
		return
	}
	c := mesh.Conversation{ID: want.ID, SessionID: want.SessionID, Agent: want.Agent, Owner: want.Owner, Status: want.Status, Title: want.Title,
		Messages: want.Messages, MessageCount: want.MessageCount, PendingApproval: want.PendingApproval, Queued: want.Queued,
		CreatedAt: want.CreatedAt, UpdatedAt: want.UpdatedAt, DeletedAt: want.DeletedAt, DeletedBy: want.DeletedBy, ForkedFrom: want.ForkedFrom}
	if want.Group != nil {
		c.Group = &mesh.GroupRun{Name: want.Group.Name}
	}
	if w := c.Summary(); !reflect.DeepEqual(got, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", data, got, w)
	}
}

// TestScanSummaryReadsHeads: a head as stored is read by the scan, not
// handed to encoding/json.
func TestScanSummaryReadsHeads(t *testing.T) {
	var h summaryHead
	if !scanSummary([]byte(summarySeeds()[0]), &h) {
		t.Fatal("the scan did not read a stored head")
	}
	if h.ID != "c1" {
		t.Errorf("scanned id = %q, want c1", h.ID)
	}
	if h.Queued == nil {
		t.Errorf("scanned queued = nil, want the stored queued turn: %+v", h)
	}
	if h.MessageCount != 9 {
		t.Errorf("scanned message count = %d, want 9", h.MessageCount)
	}
}

func BenchmarkSummaryOf(b *testing.B) {
	c := &mesh.Conversation{ID: mesh.NewID(), SessionID: "0123abcd", Agent: "assistant", Status: mesh.StatusActive, Title: "list all resources", MessageCount: 41, Version: 31, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	for i := range 21 {
		c.MessageTail = append(c.MessageTail, mesh.MessageRef{Seq: uint64(100000 + i*7), Bytes: 300})
	}
	for range 10 {
		c.RecentTurns = append(c.RecentTurns, mesh.NewID())
	}
	c.LastRun = &mesh.RunSummary{ID: mesh.NewID(), Outcome: "success", Response: "Here are the resources: a, b, c", Usage: &mesh.Usage{InputTokens: 300, OutputTokens: 40}}
	data, _ := json.Marshal(headOf(c))
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := SummaryOf(data); err != nil {
			b.Fatal(err)
		}
	}
}
