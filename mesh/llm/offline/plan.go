package offline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds the offline planner's tool choice: classifying tools,
// scoring them against a request, and the replies when none fits.

// toolProfile is what the planner knows of one tool.
type toolProfile struct {
	tool   llm.Tool
	index  int
	schema *argSchema
	// intents are named by the tool's name, else by its description, else
	// read for a ReadOnly tool. Empty for tools that name no action
	// (exit_loop, an agent reached over A2A).
	intents intentSet
	// nameVerbs are the verbs in the tool's name.
	nameVerbs map[string]bool
	// nouns are the stems of the other words of the name.
	nouns map[string]bool
	// descWords are the stems of the description's words.
	descWords map[string]bool
	// noun is the thing the tool works on, singular, for replies.
	noun string
}

func profileTools(tools []llm.Tool) []*toolProfile {
	out := make([]*toolProfile, 0, len(tools))
	for i, t := range tools {
		out = append(out, cachedProfile(t, i))
	}
	return out
}

// profiles caches tool profiles: the same catalog is offered on every call,
// and parsing schemas dominated the planner's time. Profiles are never
// changed once built, so they are shared.
var profiles struct {
	sync.Mutex
	m map[string]*toolProfile
}

// maxCachedProfiles bounds the cache; a full cache starts over.
const maxCachedProfiles = 4096

func cachedProfile(t llm.Tool, index int) *toolProfile {
	key := fmt.Sprintf("%d\x00%s\x00%s\x00%t%t\x00%s", index, t.Name, t.Description, t.ReadOnly, t.Destructive, t.Parameters)
	profiles.Lock()
	p := profiles.m[key]
	profiles.Unlock()
	if p != nil {
		return p
	}
	p = profileTool(t, index)
	profiles.Lock()
	if profiles.m == nil || len(profiles.m) >= maxCachedProfiles {
		profiles.m = map[string]*toolProfile{}
	}
	profiles.m[key] = p
	profiles.Unlock()
	return p
}

func profileTool(t llm.Tool, index int) *toolProfile {
	p := &toolProfile{
		tool: t, index: index, schema: parseArgSchema(t.Parameters),
		nameVerbs: map[string]bool{}, nouns: map[string]bool{}, descWords: map[string]bool{},
	}
	for _, w := range splitName(t.Name) {
		if in, _ := verbOf(w); in != intentNone && weakVerbs[w] == intentNone {
			p.intents.add(in)
			p.nameVerbs[w] = true
			continue
		}
		if fillers[w] || isDigits(w) {
			continue
		}
		p.nouns[stem(w)] = true
		if p.noun == "" {
			p.noun = stem(w)
		}
	}
	var descIntents intentSet
	for _, w := range tokenizeWords(t.Description) {
		if in, strong := verbOf(w.low); strong {
			descIntents.add(in)
		}
		if !fillers[w.low] {
			p.descWords[w.stem] = true
		}
	}
	switch {
	case !p.intents.empty():
	case !descIntents.empty():
		p.intents = descIntents
	case t.ReadOnly:
		p.intents.add(intentRead)
	}
	if p.noun == "" {
		p.noun = "item"
	}
	return p
}

// score rates how well p fits a request with intent in, named by the verb
// word verb, about the words content. eligible is false when p must not be
// chosen: its intents exclude in, or nothing at all matched.
func (p *toolProfile) score(in intent, verb string, content []word) (score int, eligible bool) {
	intentMatch := false
	if in != intentNone {
		if !p.intents.empty() && !p.intents.has(in) {
			return 0, false
		}
		if p.intents.has(in) {
			score += 100
			intentMatch = true
		}
	}
	if verb != "" && (p.nameVerbs[verb] || p.nameVerbs[stem(verb)] || (searchVerbs[verb] && p.hasSearchVerb())) {
		score += 20
	}
	seen := map[string]bool{}
	nounMatch, desc := false, 0
	for _, w := range content {
		if seen[w.stem] {
			continue
		}
		seen[w.stem] = true
		switch {
		case p.nouns[w.stem]:
			score += 15
			nounMatch = true
		case p.descWords[w.stem] && desc < 9:
			score += 3
			desc += 3
		}
	}
	switch {
	case in == intentRead && p.tool.ReadOnly:
		score += 5
	case in == intentRead && p.tool.Destructive:
		score -= 5
	case in.mutating() && p.tool.Destructive:
		score += 2
	case in == intentNone && p.tool.ReadOnly:
		score += 3
	}
	return score, intentMatch || nounMatch
}

// verbWord is the first verb of the tool's name, or "".
func (p *toolProfile) verbWord() string {
	for _, w := range splitName(p.tool.Name) {
		if p.nameVerbs[w] {
			return w
		}
	}
	return ""
}

func (p *toolProfile) hasSearchVerb() bool {
	for v := range p.nameVerbs {
		if searchVerbs[v] {
			return true
		}
	}
	return false
}

// userRequest is a user's message read for planning.
type userRequest struct {
	text    string
	words   []word
	intent  intent
	verbAt  int    // index of the verb word, -1 when none
	verbEnd int    // index of the last word of the verb phrase ("get rid of")
	verb    string // the verb phrase, lower case
}

func readRequest(text string) userRequest {
	r := userRequest{text: text, words: tokenizeWords(text)}
	r.intent, r.verbAt, r.verbEnd = findIntent(r.words)
	if r.verbAt >= 0 {
		var phrase []string
		for _, w := range r.words[r.verbAt : r.verbEnd+1] {
			phrase = append(phrase, w.low)
		}
		r.verb = strings.Join(phrase, " ")
	}
	return r
}

// content is the words of r that may name a thing: not the verb, not
// fillers.
func (r userRequest) content() []word {
	var out []word
	for i, w := range r.words {
		if (i >= r.verbAt && i <= r.verbEnd) || w.quoted || fillers[w.low] || connectors[w.low] {
			continue
		}
		out = append(out, w)
	}
	return out
}

// toolPick is a tool picked for a request and the arguments found for it.
type toolPick struct {
	p  *toolProfile
	ex extraction
}

// choose picks the tool for r. Among the tools with the best score, the
// first whose required arguments are all found wins; when none has them
// all, the first one does, and the planner asks for what is missing.
func choose(r userRequest, tools []*toolProfile) (toolPick, bool) {
	type scored struct {
		p     *toolProfile
		score int
	}
	var cands []scored
	content := r.content()
	for _, p := range tools {
		if s, ok := p.score(r.intent, r.verb, content); ok {
			cands = append(cands, scored{p, s})
		}
	}
	if len(cands) == 0 {
		return toolPick{}, false
	}
	slices.SortStableFunc(cands, func(a, b scored) int { return cmp.Compare(b.score, a.score) })
	var first toolPick
	for i, c := range cands {
		if c.score != cands[0].score {
			break
		}
		in := r.intent
		if in == intentNone && c.p.intents.has(intentRead) {
			in = intentRead
		}
		ex := newExtractor(r.words, r.verbAt, r.verbEnd, in, c.p, r.text).extract(c.p.schema, true)
		ch := toolPick{c.p, ex}
		if ex.complete() {
			return ch, true
		}
		if i == 0 {
			first = ch
		}
	}
	return first, true
}

// askText asks for the arguments a choice lacks: "To add a resource I
// need: value."
func askText(r userRequest, c toolPick) string {
	verb := r.verb
	if verb == "" || weakVerbs[verb] != intentNone {
		verb = c.p.verbWord()
	}
	if verb == "" {
		verb = "call " + c.p.tool.Name
	} else {
		verb += " " + article(c.p.noun) + " " + c.p.noun
	}
	if len(c.ex.oneOf) > 0 {
		return fmt.Sprintf("To %s I need one of: %s.", verb, strings.Join(c.ex.oneOf, ", "))
	}
	return fmt.Sprintf("To %s I need: %s.", verb, strings.Join(c.ex.missing, ", "))
}

// isGreeting reports whether a message only greets or thanks.
func isGreeting(ws []word) bool {
	greeted := false
	for _, w := range ws {
		switch {
		case greetings[w.low]:
			greeted = true
		case fillers[w.low] || w.low == "agent" || w.low == "bot" || w.low == "mesh":
		default:
			return false
		}
	}
	return greeted
}

// isThanks reports whether a greeting is thanks.
func isThanks(ws []word) bool {
	for _, w := range ws {
		switch w.low {
		case "thanks", "thank", "thx", "cheers":
			return true
		}
	}
	return false
}

// helpPhrases make a message a question about the planner itself.
var helpPhrases = []string{
	"what can you do", "what do you do", "who are you", "what are you",
	"capabilities", "what tools", "which tools", "your tools", "how do you work",
}

// isHelp reports whether a message asks what the planner is or can do:
// one of helpPhrases, or "help" without a verb that asks for an action.
func isHelp(r userRequest) bool {
	low := " " + strings.Join(strings.Fields(strings.ToLower(strings.Trim(r.text, " ?!."))), " ") + " "
	for _, p := range helpPhrases {
		if strings.Contains(low, " "+p+" ") {
			return true
		}
	}
	if r.intent != intentNone && r.verbAt >= 0 {
		if _, strong := verbOf(r.verb); strong {
			return false
		}
	}
	return strings.Contains(low, " help ")
}

// identity is how the planner introduces itself.
const identity = "I am the offline planner of Agent Mesh: a deterministic, rule-based planner, not an LLM."

// capabilities lists what the planner can do with tools.
func capabilities(tools []*toolProfile) string {
	var b strings.Builder
	b.WriteString(identity)
	var usable []*toolProfile
	for _, p := range tools {
		if p.tool.Name != exitLoopTool {
			usable = append(usable, p)
		}
	}
	if len(usable) == 0 {
		b.WriteString(" No tools are available to me here, so I can only answer in text.")
		return b.String()
	}
	b.WriteString(" I turn short requests such as \"list\", \"add <name> with value <n>\" or \"remove <name>\" into one tool call. My tools:\n")
	for _, p := range usable {
		fmt.Fprintf(&b, "- %s", p.tool.Name)
		if d := firstLine(p.tool.Description); d != "" {
			fmt.Fprintf(&b, ": %s", d)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}
