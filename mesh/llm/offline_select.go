package llm

import "strings"

// This file holds the offline planner's speaker selection: the answer to
// the selector request of a group chat's llm strategy (see "Speaker
// selection" at the top of offline.go).

// SelectorInstruction is the line that makes a request a speaker
// selection. The system prompt lists the participants as lines
// "- <name>: <description>" and ends with this line; the model answers
// with one name. The llm strategy of nodes/group sends it and the offline
// planner recognizes it.
const SelectorInstruction = "Reply with the name of the next speaker only."

// SelectorQuestion is the user message that ends a speaker selection's
// messages when the history ends with a member's answer. The offline
// planner does not route on it.
const SelectorQuestion = "Who speaks next?"

// selectParticipant is one "- <name>: <description>" line of a selector
// request, as words.
type selectParticipant struct {
	name string
	// nameWords and descWords are the stems of the words of the name and
	// of the description.
	nameWords map[string]bool
	descWords map[string]bool
}

// planSelection answers a speaker selection with one participant's name.
// It reports false when req is not one: no SelectorInstruction line, or
// no participant listed.
func planSelection(req Request) (offlineReply, bool) {
	ps := readParticipants(req.System)
	if len(ps) == 0 {
		return offlineReply{}, false
	}
	request, author := routedMessage(req.Messages, ps)
	return offlineReply{text: selectSpeaker(ps, request, author)}, true
}

// readParticipants reads the participants of a selector request: the run
// of "- <name>: <description>" lines just before the SelectorInstruction
// line (blank lines between them allowed), else the run just after it.
func readParticipants(system string) []selectParticipant {
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
	var ps []selectParticipant
	seen := map[string]bool{}
	for _, l := range lines[start:end] {
		name, desc, _ := participantLine(l)
		if seen[strings.ToLower(name)] {
			continue
		}
		seen[strings.ToLower(name)] = true
		p := selectParticipant{name: name, nameWords: map[string]bool{}, descWords: map[string]bool{}}
		low := strings.ToLower(name)
		p.nameWords[low], p.nameWords[stem(low)] = true, true
		for _, part := range splitName(name) {
			p.nameWords[stem(part)] = true
		}
		for _, w := range routeWords(desc) {
			p.descWords[w] = true
		}
		ps = append(ps, p)
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

// routedMessage is the message to route, the last user or assistant
// message that is not a SelectorQuestion (without the "<name>: " prefix of
// a member's answer), and the participant that wrote the last assistant
// message ("" when none did).
func routedMessage(msgs []Message, ps []selectParticipant) (request, author string) {
	authorDone, requestDone := false, false
	for i := len(msgs) - 1; i >= 0 && (!authorDone || !requestDone); i-- {
		m := msgs[i]
		if m.Role != RoleUser && m.Role != RoleAssistant {
			continue
		}
		text := strings.TrimSpace(m.Content)
		by := ""
		if m.Role == RoleAssistant {
			by = messageAuthor(m, ps)
			if by != "" {
				if rest, ok := cutPrefixFold(text, by+":"); ok {
					text = strings.TrimSpace(rest)
				}
			}
			if !authorDone {
				author, authorDone = by, true
			}
		}
		if requestDone || text == "" {
			continue
		}
		if m.Role == RoleUser && (strings.EqualFold(text, SelectorQuestion) || strings.EqualFold(text, SelectorInstruction)) {
			continue
		}
		request, requestDone = text, true
	}
	return request, author
}

// messageAuthor is the participant that wrote an assistant message: its
// Name, else the participant its content starts with ("ops: …").
func messageAuthor(m Message, ps []selectParticipant) string {
	for _, p := range ps {
		if m.Name != "" && strings.EqualFold(m.Name, p.name) {
			return p.name
		}
	}
	if m.Name != "" {
		return m.Name
	}
	text := strings.TrimSpace(m.Content)
	for _, p := range ps {
		if _, ok := cutPrefixFold(text, p.name+":"); ok {
			return p.name
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

// routeWords are the distinct stems of the words of s that are not
// fillers, with the parts of hyphenated and camelCase words.
func routeWords(s string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(w string) {
		if len(w) < 2 || fillers[w] || seen[w] {
			return
		}
		seen[w] = true
		out = append(out, w)
	}
	for _, w := range tokenizeWords(s) {
		if fillers[w.low] {
			continue
		}
		add(w.stem)
		if parts := splitName(w.raw); len(parts) > 1 {
			for _, p := range parts {
				add(stem(p))
			}
		}
	}
	return out
}

// selectSpeaker picks the participant for request: +2 for each word of
// the request in its name, +1 in its description; the best score wins,
// ties by list order, never the author while another participant scores;
// with no score, the first participant that is not the author.
func selectSpeaker(ps []selectParticipant, request, author string) string {
	words := routeWords(request)
	scores := make([]int, len(ps))
	self, others := -1, false
	for i, p := range ps {
		for _, w := range words {
			switch {
			case p.nameWords[w]:
				scores[i] += 2
			case p.descWords[w]:
				scores[i]++
			}
		}
		if p.name == author {
			self = i
		} else if scores[i] > 0 {
			others = true
		}
	}
	if self >= 0 && others {
		scores[self] = -1
	}
	best := -1
	for i, sc := range scores {
		if sc > 0 && (best < 0 || sc > scores[best]) {
			best = i
		}
	}
	if best >= 0 {
		return ps[best].name
	}
	for i, p := range ps {
		if i != self {
			return p.name
		}
	}
	return ps[0].name
}
