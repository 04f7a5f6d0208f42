package llm

import (
	"reflect"
	"strings"
	"testing"
)

func TestReadSelectionParticipants(t *testing.T) {
	tests := []struct {
		name   string
		system string
		want   []string
	}{
		{name: "no instruction", system: "- ops: deploys\n- coder: codes"},
		{name: "no participants", system: "Pick someone.\n" + SelectorInstruction},
		{name: "bullets that are not names", system: "- prefer the coder: always\n\n" + SelectorInstruction},
		{name: "participants after the instruction", system: SelectorInstruction + "\n\n- ops: deploys\n- coder: codes", want: []string{"ops", "coder"}},
		{name: "the run nearest the instruction", system: "Rules:\n- Note: be brief\n\nParticipants:\n- ops: deploys\n- coder: codes\n" + SelectorInstruction, want: []string{"ops", "coder"}},
		{name: "duplicates once", system: "- ops: deploys\n- OPS: again\n" + SelectorInstruction, want: []string{"ops"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			sel, ok := ReadSelection(Request{System: tt.system})
			if ok != (len(tt.want) > 0) {
				t.Errorf("ReadSelection ok = %v, want %v", ok, len(tt.want) > 0)
			}
			for _, p := range sel.Participants {
				got = append(got, p.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("participants %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSelectionRoundTrip: ReadSelection reads back what Request writes.
func TestSelectionRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		sel  Selection
		// wantQuestion: Request ends the messages with SelectorQuestion.
		wantQuestion bool
	}{
		{
			name: "answers then a user message",
			sel: Selection{
				Participants: []Participant{{Name: "coder", Description: "writes Go code"}, {Name: "ops"}},
				History: []Message{
					{Role: RoleUser, Content: "fix the parser"},
					{Role: RoleAssistant, Name: "coder", Content: "Fixed."},
					{Role: RoleUser, Content: "now deploy it"},
				},
			},
		},
		{
			name: "ends with an answer",
			sel: Selection{
				Participants: []Participant{{Name: "coder", Description: "writes Go code"}, {Name: "ops", Description: "deploys"}},
				History:      []Message{{Role: RoleUser, Content: "fix it"}, {Role: RoleAssistant, Name: "ops", Content: "Not mine: coder?"}},
			},
			wantQuestion: true,
		},
		{
			name:         "no history",
			sel:          Selection{Participants: []Participant{{Name: "a-1", Description: "first"}}},
			wantQuestion: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.sel.Request("Pick one.")
			if !strings.HasPrefix(req.System, "Pick one.\n\n- ") || !strings.HasSuffix(req.System, "\n\n"+SelectorInstruction) {
				t.Errorf("system prompt %q: want the prompt, the participants, then the instruction", req.System)
			}
			last := req.Messages[len(req.Messages)-1]
			if gotQ := last.Role == RoleUser && last.Content == SelectorQuestion; gotQ != tt.wantQuestion {
				t.Errorf("messages end with %+v; want the question: %v", last, tt.wantQuestion)
			}
			got, ok := ReadSelection(req)
			if !ok {
				t.Fatalf("ReadSelection(%q): not a selection", req.System)
			}
			if !reflect.DeepEqual(got.Participants, tt.sel.Participants) {
				t.Errorf("participants %+v, want %+v", got.Participants, tt.sel.Participants)
			}
			if len(got.History) != len(tt.sel.History) || (len(got.History) > 0 && !reflect.DeepEqual(got.History, tt.sel.History)) {
				t.Errorf("history %+v, want %+v", got.History, tt.sel.History)
			}
		})
	}
}

// TestReadSelectionHistory: authors come from names or from the content's
// "<name>: ", in any case; tool messages and the question drop out.
func TestReadSelectionHistory(t *testing.T) {
	req := Request{
		System: "- coder: codes\n- ops: deploys\n" + SelectorInstruction,
		Messages: []Message{
			{Role: RoleUser, Content: "  ship it  "},
			{Role: RoleAssistant, Content: "OPS: on it"},
			{Role: RoleTool, Content: "deployed"},
			{Role: RoleAssistant, Name: "Coder", Content: "coder:   done"},
			{Role: RoleAssistant, Name: "stranger", Content: "stranger: hello"},
			{Role: RoleAssistant, Content: "no author"},
			{Role: RoleUser, Content: "who speaks next?"},
		},
	}
	got, ok := ReadSelection(req)
	if !ok {
		t.Fatal("not a selection")
	}
	want := []Message{
		{Role: RoleUser, Content: "ship it"},
		{Role: RoleAssistant, Name: "ops", Content: "on it"},
		{Role: RoleAssistant, Name: "coder", Content: "done"},
		{Role: RoleAssistant, Name: "stranger", Content: "hello"},
		{Role: RoleAssistant, Content: "no author"},
	}
	if !reflect.DeepEqual(got.History, want) {
		t.Errorf("history\n got %+v\nwant %+v", got.History, want)
	}
}
