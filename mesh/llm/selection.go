package llm

import "strings"

// This file holds the speaker selection convention: how to ask any model
// which participant of a multi-party chat speaks next, and how to read
// such a request back. A chat's orchestrator writes it with
// [Selection.Request]; a model that is not a language model (the offline
// planner) recognizes it with [ReadSelection] and answers with a name.

// SelectorInstruction is the line that makes a request a speaker
// selection. The system prompt lists the participants as lines
// "- <name>: <description>" and ends with this line; the model answers
// with one name.
const SelectorInstruction = "Reply with the name of the next speaker only."

// SelectorQuestion is the user message that ends a speaker selection's
// messages when the history ends with a participant's answer, so that the
// model is asked something. Readers do not route on it.
const SelectorQuestion = "Who speaks next?"

// Participant is one candidate of a speaker selection.
type Participant struct {
	// Name is what the model answers with: letters, digits, '_' and '-'.
	Name string
	// Description says what the participant does; the model chooses by
	// it. It may be empty.
	Description string
}

// Selection is a speaker selection: who may speak next, and what was said.
type Selection struct {
	// Participants are the candidates, in order.
	Participants []Participant
	// History is the chat so far, oldest first: user messages, and the
	// participants' answers as assistant messages with Name set.
	History []Message
}

// Request is the request that asks a model for the next speaker of s.
// Its system prompt is prompt (what the chat is and how to choose), a
// blank line, a line "- <name>: <description>" per participant, a blank
// line and SelectorInstruction. Its messages are s.History, each assistant
// message's content starting "<name>: " when it has a Name, then
// SelectorQuestion when the history is empty or does not end with a user
// message.
func (s Selection) Request(prompt string) Request {
	var b strings.Builder
	b.WriteString(prompt)
	b.WriteString("\n\n")
	for _, p := range s.Participants {
		b.WriteString("- " + p.Name + ":")
		if p.Description != "" {
			b.WriteString(" " + p.Description)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n" + SelectorInstruction)

	msgs := make([]Message, 0, len(s.History)+1)
	for _, m := range s.History {
		if m.Role == RoleAssistant && m.Name != "" {
			m.Content = m.Name + ": " + m.Content
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleUser {
		msgs = append(msgs, Message{Role: RoleUser, Content: SelectorQuestion})
	}
	return Request{System: b.String(), Messages: msgs}
}

// ReadSelection reads a speaker selection from req, as [Selection.Request]
// writes it, and reports false when req is not one: no line of its system
// prompt is SelectorInstruction, or no participant is listed.
//
// The participants are the run of "- <name>: <description>" lines just
// before the SelectorInstruction line (blank lines between them allowed),
// else the run just after it; a line whose name is not letters, digits,
// '_' and '-' ends the run, and a name listed twice (in any case) counts
// once. The history keeps the user and assistant messages, trimmed,
// without the user messages that are SelectorQuestion or
// SelectorInstruction; an assistant message's Name is its author (the
// participant its Name matches in any case, else its Name, else the
// participant its content starts with, "ops: …"), and its content loses
// the "<author>: " it starts with.
func ReadSelection(req Request) (Selection, bool) {
	ps := readParticipants(req.System)
	if len(ps) == 0 {
		return Selection{}, false
	}
	var h []Message
	for _, m := range req.Messages {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			continue
		}
		text := strings.TrimSpace(m.Content)
		if m.Role == RoleUser {
			if strings.EqualFold(text, SelectorQuestion) || strings.EqualFold(text, SelectorInstruction) {
				continue
			}
			h = append(h, Message{Role: RoleUser, Name: m.Name, Content: text})
			continue
		}
		by := messageAuthor(m, ps)
		if by != "" {
			if rest, ok := cutPrefixFold(text, by+":"); ok {
				text = strings.TrimSpace(rest)
			}
		}
		h = append(h, Message{Role: RoleAssistant, Name: by, Content: text})
	}
	return Selection{Participants: ps, History: h}, true
}

// readParticipants reads the participants of a selection's system prompt;
// see [ReadSelection].
func readParticipants(system string) []Participant {
	lines := strings.Split(system, "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == SelectorInstruction {
			at = i
			break
		}
	}
	if at < 0 {
		return nil
	}
	end := at
	for end > 0 && strings.TrimSpace(lines[end-1]) == "" {
		end--
	}
	start := end
	for start > 0 {
		if _, _, ok := participantLine(lines[start-1]); !ok {
			break
		}
		start--
	}
	if start == end {
		start = at + 1
		for start < len(lines) && strings.TrimSpace(lines[start]) == "" {
			start++
		}
		end = start
		for end < len(lines) {
			if _, _, ok := participantLine(lines[end]); !ok {
				break
			}
			end++
		}
	}
	var ps []Participant
	seen := map[string]bool{}
	for _, l := range lines[start:end] {
		name, desc, _ := participantLine(l)
		if seen[strings.ToLower(name)] {
			continue
		}
		seen[strings.ToLower(name)] = true
		ps = append(ps, Participant{Name: name, Description: desc})
	}
	return ps
}

// participantLine parses "- <name>: <description>". The name is an agent
// name: letters, digits, '_' and '-'.
func participantLine(l string) (name, desc string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(l), "- ")
	if !ok {
		return "", "", false
	}
	name, desc, ok = strings.Cut(rest, ":")
	name = strings.TrimSpace(name)
	if !ok || !isAgentName(name) {
		return "", "", false
	}
	return name, strings.TrimSpace(desc), true
}

func isAgentName(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return false
		}
	}
	return s != ""
}

// messageAuthor is the participant that wrote an assistant message: its
// Name, else the participant its content starts with ("ops: …").
func messageAuthor(m Message, ps []Participant) string {
	for _, p := range ps {
		if m.Name != "" && strings.EqualFold(m.Name, p.Name) {
			return p.Name
		}
	}
	if m.Name != "" {
		return m.Name
	}
	text := strings.TrimSpace(m.Content)
	for _, p := range ps {
		if _, ok := cutPrefixFold(text, p.Name+":"); ok {
			return p.Name
		}
	}
	return ""
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
