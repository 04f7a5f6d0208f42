package offline

import (
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds the planner's answer to a speaker selection, the
// convention of llm.Selection (see "Speaker selection" in the package doc).

// selectParticipant is a participant of a speaker selection, as words.
type selectParticipant struct {
	name string
	// nameWords and descWords are the stems of the words of the name and
	// of the description.
	nameWords map[string]bool
	descWords map[string]bool
}

// planSelection answers a speaker selection (llm.ReadSelection) with one
// participant's name. It reports false when req is not one.
func planSelection(req llm.Request) (reply, bool) {
	sel, ok := llm.ReadSelection(req)
	if !ok {
		return reply{}, false
	}
	ps := make([]selectParticipant, 0, len(sel.Participants))
	for _, p := range sel.Participants {
		ps = append(ps, newSelectParticipant(p))
	}
	request, author := routedMessage(sel.History)
	return reply{text: selectSpeaker(ps, request, author)}, true
}

func newSelectParticipant(p llm.Participant) selectParticipant {
	sp := selectParticipant{name: p.Name, nameWords: map[string]bool{}, descWords: map[string]bool{}}
	low := strings.ToLower(p.Name)
	sp.nameWords[low], sp.nameWords[stem(low)] = true, true
	for _, part := range splitName(p.Name) {
		sp.nameWords[stem(part)] = true
	}
	for _, w := range routeWords(p.Description) {
		sp.descWords[w] = true
	}
	return sp
}

// routedMessage is the message to route, the last message of a
// selection's history with text, and the participant that wrote the last
// assistant message ("" when none did).
func routedMessage(history []llm.Message) (request, author string) {
	authorDone := false
	for i := len(history) - 1; i >= 0; i-- {
		m := history[i]
		if m.Role == llm.RoleAssistant && !authorDone {
			author, authorDone = m.Name, true
		}
		if request == "" {
			request = m.Content
		}
	}
	return request, author
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
