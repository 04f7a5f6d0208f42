package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fatih/color"

	"github.com/agentmesh/agentmesh/mesh"
)

// Colours of the terminal commands. fatih/color turns them off when stdout
// is not a terminal or NO_COLOR is set.
var (
	dim     = color.New(color.Faint).SprintFunc()
	bold    = color.New(color.Bold).SprintFunc()
	red     = color.New(color.FgRed).SprintFunc()
	green   = color.New(color.FgGreen).SprintFunc()
	yellow  = color.New(color.FgYellow).SprintFunc()
	blue    = color.New(color.FgBlue).SprintFunc()
	cyan    = color.New(color.FgCyan).SprintFunc()
	magenta = color.New(color.FgMagenta).SprintFunc()
)

// oneLine squeezes s onto one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

// compactJSON is v as one line of JSON.
func compactJSON(v any) string {
	if v == nil {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// customValue decodes the value of a CUSTOM event into out.
func customValue(ev mesh.Event, out any) bool {
	b, err := json.Marshal(ev.Value)
	return err == nil && json.Unmarshal(b, out) == nil
}

// decidedText says how an approval was decided: "approved by ops".
func decidedText(ap *mesh.Approval) string {
	if ap.Decision == nil {
		return string(ap.Status)
	}
	verb := "rejected"
	if ap.Decision.Approved {
		verb = "approved"
	}
	s := verb + " by " + ap.Decision.By
	if !ap.DecidedAt.IsZero() {
		s += " at " + ap.DecidedAt.Local().Format(time.DateTime)
	}
	if ap.Decision.Reason != "" {
		s += ": " + ap.Decision.Reason
	}
	return s
}

// typeColour colours an event type by its family.
func typeColour(t mesh.EventType) string {
	s := string(t)
	switch {
	case t == mesh.EventRunError:
		return red(s)
	case strings.HasPrefix(s, "RUN_"):
		return blue(s)
	case strings.HasPrefix(s, "TEXT_"):
		return cyan(s)
	case strings.HasPrefix(s, "TOOL_"):
		return yellow(s)
	case t == mesh.EventCustom:
		return magenta(s)
	}
	return s
}

// eventDetail is the short description of an event on a tail line.
func eventDetail(ev mesh.Event) string {
	switch ev.Type {
	case mesh.EventRunStarted:
		return "run " + ev.RunID
	case mesh.EventRunFinished:
		s := "run " + ev.RunID
		if ev.Outcome != nil {
			s += " " + ev.Outcome.Type
			for _, in := range ev.Outcome.Interrupts {
				s += " " + in.Reason + " " + in.ID
			}
		}
		return s
	case mesh.EventRunError:
		return ev.Code + ": " + oneLine(ev.Message, 200)
	case mesh.EventStepStarted, mesh.EventStepFinished:
		return ev.StepName
	case mesh.EventTextMessageStart:
		return strings.TrimSpace(ev.Role + " " + ev.Name)
	case mesh.EventTextMessageContent, mesh.EventToolCallArgs, mesh.EventReasoningMessageContent:
		return fmt.Sprintf("%q", ev.DeltaText())
	case mesh.EventToolCallStart:
		return ev.ToolCallName + " " + ev.ToolCallID
	case mesh.EventToolCallEnd:
		return ev.ToolCallID
	case mesh.EventToolCallResult:
		return ev.ToolCallID + " " + oneLine(ev.Content, 160)
	case mesh.EventStateDelta:
		return oneLine(compactJSON(ev.Delta), 160)
	case mesh.EventCustom:
		return ev.Name + " " + oneLine(compactJSON(ev.Value), 160)
	}
	return ""
}

// tailLine is one event as `mesh tail` prints it for people.
func tailLine(conv string, ev mesh.Event, withConv bool) string {
	at := time.Now()
	if ev.Timestamp > 0 {
		at = time.UnixMilli(ev.Timestamp)
	}
	var b strings.Builder
	b.WriteString(dim(at.Local().Format("15:04:05.000")))
	if withConv {
		b.WriteString(" " + conv)
	}
	b.WriteString(" " + typeColour(ev.Type))
	if d := eventDetail(ev); d != "" {
		b.WriteString(" " + d)
	}
	return b.String()
}

// chatPrinter shows a conversation's events as a chat: streamed text, tool
// calls and results on a line each, approvals and errors.
type chatPrinter struct {
	w io.Writer
	// agent names the speaker of a text message that names none.
	agent  string
	inText bool
	args   map[string]*strings.Builder
	names  map[string]string
}

func newChatPrinter(w io.Writer, agent string) *chatPrinter {
	return &chatPrinter{w: w, agent: agent, args: map[string]*strings.Builder{}, names: map[string]string{}}
}

// endText ends a text message left open on its line.
func (p *chatPrinter) endText() {
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
}

func (p *chatPrinter) line(format string, args ...any) {
	p.endText()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// event prints one event.
func (p *chatPrinter) event(ev mesh.Event) {
	switch ev.Type {
	case mesh.EventTextMessageStart:
		p.endText()
		name := ev.Name
		if name == "" {
			name = p.agent
		}
		fmt.Fprint(p.w, bold(name)+": ")
		p.inText = true
	case mesh.EventTextMessageContent:
		if !p.inText {
			fmt.Fprint(p.w, bold(p.agent)+": ")
			p.inText = true
		}
		fmt.Fprint(p.w, ev.DeltaText())
	case mesh.EventTextMessageEnd:
		p.endText()
	case mesh.EventToolCallStart:
		p.names[ev.ToolCallID] = ev.ToolCallName
		p.args[ev.ToolCallID] = &strings.Builder{}
	case mesh.EventToolCallArgs:
		if b := p.args[ev.ToolCallID]; b != nil {
			b.WriteString(ev.DeltaText())
		}
	case mesh.EventToolCallEnd:
		args := "{}"
		if b := p.args[ev.ToolCallID]; b != nil && b.Len() > 0 {
			args = b.String()
		}
		p.line("  %s %s %s", yellow("[call]"), p.names[ev.ToolCallID], oneLine(args, 160))
	case mesh.EventToolCallResult:
		p.line("  %s %s", yellow("[result]"), oneLine(ev.Content, 200))
	case mesh.EventRunError:
		p.line("  %s %s", red("[error "+ev.Code+"]"), ev.Message)
	case mesh.EventRunFinished:
		if ev.Outcome != nil && ev.Outcome.Type == mesh.OutcomeCancelled {
			p.line("  %s", dim("[cancelled]"))
		}
	case mesh.EventCustom:
		p.custom(ev)
	}
}

func (p *chatPrinter) custom(ev mesh.Event) {
	switch ev.Name {
	case mesh.CustomApprovalRequested:
		var ap mesh.Approval
		if customValue(ev, &ap) {
			p.approval(&ap)
		}
	case mesh.CustomApprovalDecided:
		var ap mesh.Approval
		if customValue(ev, &ap) {
			mark := green
			if ap.Status == mesh.ApprovalRejected {
				mark = red
			}
			p.line("  %s", mark("["+decidedText(&ap)+"]"))
		}
	case "speaker_selected":
		var v struct {
			Speaker string `json:"speaker"`
		}
		if customValue(ev, &v) && v.Speaker != "" {
			p.line("  %s", dim("[speaker "+v.Speaker+"]"))
		}
	case "group_ended":
		var v struct {
			Reason string `json:"reason"`
		}
		if customValue(ev, &v) {
			p.line("  %s", dim("[group ended: "+v.Reason+"]"))
		}
	}
}

// approval shows an approval with its tool and arguments.
func (p *chatPrinter) approval(ap *mesh.Approval) {
	tool := ap.ToolName
	if ap.Server != "" {
		tool += " on " + ap.Server
	}
	p.line("  %s %s %s", magenta("[approval needed]"), bold(tool), compactJSON(ap.ToolArgs))
	if ap.Description != "" {
		p.line("    %s", dim(oneLine(ap.Description, 200)))
	}
	p.line("    %s", dim("id "+ap.UUID))
}

// history prints the messages of a conversation being resumed.
func (p *chatPrinter) history(c *mesh.Conversation) {
	for _, m := range c.Messages {
		switch m.Role {
		case mesh.RoleUser:
			p.line("%s %s", bold("you:"), m.Content)
		case mesh.RoleAssistant:
			name := m.Name
			if name == "" {
				name = p.agent
			}
			if m.Content != "" {
				p.line("%s %s", bold(name+":"), m.Content)
			}
			for _, call := range m.ToolCalls {
				p.line("  %s %s %s", yellow("[call]"), call.Name, oneLine(call.ArgumentsJSON(), 160))
			}
		case mesh.RoleTool:
			s := oneLine(m.Content, 200)
			if m.DecidedBy != "" {
				s += dim(" (decided by " + m.DecidedBy + ")")
			}
			p.line("  %s %s", yellow("[result]"), s)
		}
	}
}
