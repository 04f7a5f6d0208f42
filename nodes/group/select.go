package group

// Speaker selection
//
// A group chat answers a user's message with a run of member turns. Before
// each turn a [Selector] picks who speaks, from a [Turn]: who spoke so far
// and when, the message to answer, the recent history and the members
// known to be down. Selection is pure computation, except for the one
// model call of the llm strategy, and the same Turn always gets the same
// Choice (with a deterministic selector model).
//
// # Candidates
//
// Selection starts from the participants in config order and removes:
//
//   - the members that are down (Turn.Down);
//   - the last speaker when it took max_consecutive turns in a row at the
//     end of Turn.Recent (zero means 1). An entry of Recent that is not a
//     member, such as "user", ends a run of turns;
//   - when allowed_transitions lists the last speaker, the members it does
//     not list after it. When that leaves nobody, the transitions are
//     ignored and the reason says so.
//
// When nobody is left the Choice has no speaker and says why: "every
// member is down", or "no member may speak: …".
//
// min_interval throttles without removing anyone: a candidate whose last
// turn ended less than min_interval before Turn.Now is passed over while
// an unthrottled candidate remains. When every candidate is throttled the
// strategy chooses among all of them and Choice.Wait is the time until the
// chosen one may speak.
//
// # Strategies
//
//   - round_robin (the default): the first candidate after the last member
//     who spoke (in Recent), in config order, wrapping around; the first
//     candidate when no member has spoken yet.
//   - priority: among the candidates with a keyword or pattern that matches
//     the message, the one of highest priority (ties: config order); when
//     none matches, the candidate of highest priority.
//   - router: each candidate scores +1 per keyword and +2 per pattern that
//     matches the message; the best score wins, ties by higher priority
//     then config order. When nothing matches, the group's default member
//     if it is a candidate, else round robin.
//   - llm: a model chooses, asked by the speaker selection convention of
//     llm.Selection: its system prompt is selector_prompt (or a default
//     instruction), then the candidates as lines "- <name>: <description>",
//     then llm.SelectorInstruction; its messages are the last 20 of
//     Turn.History, a member's as an assistant message named after it and
//     starting "<name>: ", then llm.SelectorQuestion when the history does
//     not end with the user. The answer, trimmed of
//     punctuation, quotes and markdown, is a candidate's name (any case),
//     or else names exactly one candidate as a whole word. Any other
//     answer, or a failed call, falls back to round robin, and the reason
//     quotes the answer or the error. The offline planner answers by
//     matching the message's words with the descriptions (see "Speaker
//     selection" in the doc of mesh/llm/offline).
//
// Keywords match case-insensitively as whole words, a keyword of several
// words as a phrase (any spaces between its words). Patterns are Go
// regular expressions matched against the message as written; (?i) makes
// one ignore case.
//
// # Choices
//
// Choice.Strategy is the strategy that decided: the group's, or
// round_robin when the router or the llm strategy fell back to it.
// Choice.Reason says why in words ("keyword \"deploy\" matched", "next in
// turn", "selector chose ops"). Choice.Skipped lists the down members and,
// except with the llm strategy, the member the strategy would have chosen
// but for max_consecutive, allowed_transitions or min_interval (each
// relaxed alone). When nobody may speak it lists every member and why.

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// historyLimit is how many history messages the llm strategy sends.
const historyLimit = 20

// defaultSelectorPrompt instructs the llm strategy's model when the group
// has no selector_prompt.
const defaultSelectorPrompt = "You choose who speaks next in a group chat. " +
	"Read the conversation and pick the participant whose description fits the last message best."

// Selector picks speakers for one group. Built once per group; safe for
// concurrent use.
type Selector struct {
	group          string
	strategy       string
	members        []member
	index          map[string]int
	allowed        [][]bool // by member: who may follow it; nil means anyone
	def            int      // the router's default member; -1 for none
	maxConsecutive int
	minInterval    time.Duration
	prompt         string
	llm            llm.Provider
}

// member is a participant, ready for matching.
type member struct {
	name     string
	desc     string // on one line
	priority int
	keywords []string // lower case, words separated by one space
	patterns []*regexp.Regexp
	tools    []string // after_tools: path.Match patterns of tool names
}

// NewSelector returns the selector of g. selector is the llm strategy's
// model; it may be nil for the other strategies. An empty strategy means
// round_robin and a zero max_consecutive means 1.
func NewSelector(g config.Group, selector llm.Provider) (*Selector, error) {
	s := &Selector{
		group:          g.Name,
		strategy:       g.Strategy,
		index:          make(map[string]int, len(g.Participants)),
		def:            -1,
		maxConsecutive: g.MaxConsecutive,
		minInterval:    g.MinInterval.Std(),
		prompt:         strings.TrimSpace(g.SelectorPrompt),
		llm:            selector,
	}
	if s.strategy == "" {
		s.strategy = config.StrategyRoundRobin
	}
	switch s.strategy {
	case config.StrategyRoundRobin, config.StrategyPriority, config.StrategyRouter:
	case config.StrategyLLM:
		if selector == nil {
			return nil, fmt.Errorf("group %s: the llm strategy needs a selector model", g.Name)
		}
	default:
		return nil, fmt.Errorf("group %s: unknown strategy %q (want round_robin, priority, router or llm)", g.Name, g.Strategy)
	}
	if s.maxConsecutive <= 0 {
		s.maxConsecutive = config.DefaultGroupMaxConsecutive
	}
	if s.minInterval < 0 {
		return nil, fmt.Errorf("group %s: negative min_interval %s", g.Name, s.minInterval)
	}
	if s.prompt == "" {
		s.prompt = defaultSelectorPrompt
	}
	if len(g.Participants) == 0 {
		return nil, fmt.Errorf("group %s: no participants", g.Name)
	}
	for i, p := range g.Participants {
		if p.Agent == "" {
			return nil, fmt.Errorf("group %s: participant %d has no agent", g.Name, i)
		}
		if _, dup := s.index[p.Agent]; dup {
			return nil, fmt.Errorf("group %s: %s is a participant twice", g.Name, p.Agent)
		}
		m := member{name: p.Agent, desc: strings.Join(strings.Fields(p.Description), " "), priority: p.Priority}
		for _, k := range p.Keywords {
			if k = normalize(k); k != "" {
				m.keywords = append(m.keywords, k)
			}
		}
		for _, pat := range p.Patterns {
			re, err := regexp.Compile(pat)
			if err != nil {
				return nil, fmt.Errorf("group %s: participant %s: pattern %q: %w", g.Name, p.Agent, pat, err)
			}
			m.patterns = append(m.patterns, re)
		}
		for _, pat := range p.AfterTools {
			if _, err := path.Match(pat, ""); err != nil {
				return nil, fmt.Errorf("group %s: participant %s: after_tools %q: %w", g.Name, p.Agent, pat, err)
			}
			m.tools = append(m.tools, pat)
		}
		s.index[p.Agent] = i
		s.members = append(s.members, m)
	}
	if g.Default != "" {
		i, ok := s.index[g.Default]
		if !ok {
			return nil, fmt.Errorf("group %s: default %s is not a participant", g.Name, g.Default)
		}
		s.def = i
	}
	if len(g.AllowedTransitions) > 0 {
		s.allowed = make([][]bool, len(s.members))
		for from, tos := range g.AllowedTransitions {
			i, ok := s.index[from]
			if !ok {
				return nil, fmt.Errorf("group %s: allowed_transitions: %s is not a participant", g.Name, from)
			}
			s.allowed[i] = make([]bool, len(s.members))
			for _, to := range tos {
				j, ok := s.index[to]
				if !ok {
					return nil, fmt.Errorf("group %s: allowed_transitions of %s: %s is not a participant", g.Name, from, to)
				}
				s.allowed[i][j] = true
			}
		}
	}
	return s, nil
}

// Turn is the state selection reads.
type Turn struct {
	// Recent are the speakers of the chat so far, oldest first; the last
	// one spoke last. It may span earlier user messages: an entry that is
	// not a member (such as "user") ends a run of turns for
	// max_consecutive, and round robin continues after the last member in
	// it.
	Recent []string
	// LastSpoke is when each member's last turn ended.
	LastSpoke map[string]time.Time
	// Message is the message to answer: the user's at the start of a
	// round, else the last member's answer.
	Message string
	// Tools are the tools the last member called in its turn, in order
	// (none at the start of a round): after_tools routes by them.
	Tools []string
	// History is the recent history for the llm strategy, oldest first;
	// the last 20 messages are used.
	History []Message
	// Down are the members known to be down, with why ("node down"). They
	// are skipped.
	Down map[string]string
	// Now is the time of the selection. Zero means time.Now().
	Now time.Time
}

// Message is one message of a group chat's history.
type Message struct {
	// Role is "user" or "assistant".
	Role string
	// Name is the member that wrote an assistant message.
	Name    string
	Content string
}

// Choice is the outcome of a selection.
type Choice struct {
	// Speaker is the member that speaks next; "" when nobody may speak.
	Speaker string
	// Strategy is the strategy that decided: the group's, or
	// "round_robin" when it fell back to round robin.
	Strategy string
	// Reason says why, in words.
	Reason string
	// Wait, when positive, is how long the speaker must wait before its
	// turn (min_interval).
	Wait time.Duration
	// Skipped are the members passed over, and why.
	Skipped []Skip
}

// Skip is a member passed over by a selection.
type Skip struct {
	Member string
	Reason string
}

// pick is one strategy's decision over a set of candidates.
type pick struct {
	member   int
	strategy string
	reason   string
}

// Next picks the next speaker. Its error is ctx's, when ctx ends; a
// failing selector model falls back to round robin.
func (s *Selector) Next(ctx context.Context, t Turn) (Choice, error) {
	if err := ctx.Err(); err != nil {
		return Choice{}, err
	}
	now := t.Now
	if now.IsZero() {
		now = time.Now()
	}
	last, run, prev := s.lastSpeakers(t.Recent)

	var skipped []Skip
	up := make([]int, 0, len(s.members)) // not down
	for i, m := range s.members {
		if why, down := t.Down[m.name]; down {
			if why == "" {
				why = "down"
			}
			skipped = append(skipped, Skip{m.name, why})
			continue
		}
		up = append(up, i)
	}
	open, limited := up, -1 // limited: the last speaker at max_consecutive
	if last >= 0 && run >= s.maxConsecutive && slices.Contains(up, last) {
		limited = last
		open = slices.DeleteFunc(slices.Clone(up), func(i int) bool { return i == last })
	}
	if len(open) == 0 {
		if limited >= 0 {
			skipped = append(skipped, Skip{s.members[limited].name, consecutiveReason(run, s.maxConsecutive)})
		}
		reason := "every member is down"
		if !s.allDown(t.Down) {
			var parts []string
			for _, k := range skipped {
				parts = append(parts, k.Member+": "+k.Reason)
			}
			reason = "no member may speak: " + strings.Join(parts, "; ")
		}
		return Choice{Strategy: s.strategy, Reason: reason, Skipped: skipped}, nil
	}

	var notes []string
	cands := open
	if last >= 0 && s.allowed != nil && s.allowed[last] != nil {
		allowed := s.allowed[last]
		var ok []int
		for _, i := range open {
			if allowed[i] {
				ok = append(ok, i)
			}
		}
		if len(ok) == 0 {
			notes = append(notes, fmt.Sprintf("allowed_transitions after %s leave no member who may speak: ignored", s.members[last].name))
		} else {
			cands = ok
		}
	}

	pool, throttled := s.unthrottled(cands, t.LastSpoke, now)

	var ms []matches
	if s.strategy == config.StrategyPriority || s.strategy == config.StrategyRouter {
		ms = s.match(t.Message, t.Tools, up)
	}
	var p pick
	if s.strategy == config.StrategyLLM {
		var err error
		if p, err = s.askModel(ctx, pool, prev, t); err != nil {
			return Choice{}, err
		}
	} else {
		p = s.decide(pool, prev, ms)
		// Name the member the strategy would have chosen but for
		// max_consecutive, the transitions or the throttle.
		if limited >= 0 {
			all, _ := s.unthrottled(up, t.LastSpoke, now)
			if q := s.decide(all, prev, ms); q.member == limited {
				skipped = append(skipped, Skip{s.members[limited].name, consecutiveReason(run, s.maxConsecutive)})
			}
		}
		if len(cands) < len(open) {
			all, _ := s.unthrottled(open, t.LastSpoke, now)
			if q := s.decide(all, prev, ms); q.member != p.member && !slices.Contains(cands, q.member) {
				skipped = append(skipped, Skip{s.members[q.member].name, "not allowed after " + s.members[last].name})
			}
		}
		if len(pool) < len(cands) {
			if q := s.decide(cands, prev, ms); q.member != p.member && !slices.Contains(pool, q.member) {
				ago := now.Sub(t.LastSpoke[s.members[q.member].name])
				skipped = append(skipped, Skip{s.members[q.member].name,
					fmt.Sprintf("spoke %s ago (min_interval %s)", roundDuration(ago), s.minInterval)})
			}
		}
	}

	c := Choice{Speaker: s.members[p.member].name, Strategy: p.strategy, Skipped: skipped}
	if throttled {
		c.Wait = t.LastSpoke[c.Speaker].Add(s.minInterval).Sub(now)
		notes = append(notes, fmt.Sprintf("every candidate spoke within min_interval %s: %s waits %s",
			s.minInterval, c.Speaker, roundDuration(c.Wait)))
	}
	c.Reason = strings.Join(append([]string{p.reason}, notes...), "; ")
	return c, nil
}

// lastSpeakers reads Recent: the member that spoke last (-1 when the last
// entry is not a member), how many turns it took in a row at the end, and
// the last member in it (-1 for none), where round robin continues.
func (s *Selector) lastSpeakers(recent []string) (last, run, prev int) {
	last, prev = -1, -1
	if n := len(recent); n > 0 {
		if i, ok := s.index[recent[n-1]]; ok {
			last = i
			for j := n - 1; j >= 0 && recent[j] == recent[n-1]; j-- {
				run++
			}
		}
	}
	for j := len(recent) - 1; j >= 0; j-- {
		if i, ok := s.index[recent[j]]; ok {
			prev = i
			break
		}
	}
	return last, run, prev
}

// allDown reports whether every member is in down.
func (s *Selector) allDown(down map[string]string) bool {
	for _, m := range s.members {
		if _, ok := down[m.name]; !ok {
			return false
		}
	}
	return true
}

func consecutiveReason(run, limit int) string {
	if run == 1 {
		return fmt.Sprintf("took the last turn (max_consecutive %d)", limit)
	}
	return fmt.Sprintf("took the last %d turns (max_consecutive %d)", run, limit)
}

// unthrottled is the candidates that min_interval lets speak at now; when
// it lets none, all of them, and throttled is true.
func (s *Selector) unthrottled(cands []int, lastSpoke map[string]time.Time, now time.Time) (pool []int, throttled bool) {
	pool = s.ready(cands, lastSpoke, now)
	if len(pool) == 0 {
		return cands, true
	}
	return pool, false
}

// ready is the members of set that min_interval lets speak at now.
func (s *Selector) ready(set []int, lastSpoke map[string]time.Time, now time.Time) []int {
	if s.minInterval <= 0 || len(lastSpoke) == 0 {
		return set
	}
	var out []int
	for _, i := range set {
		at, ok := lastSpoke[s.members[i].name]
		if !ok || !at.Add(s.minInterval).After(now) {
			out = append(out, i)
		}
	}
	if len(out) == len(set) {
		return set
	}
	return out
}

// roundDuration rounds d to the millisecond for reasons.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Millisecond || d <= -time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d
}

// decide applies a strategy that needs no model to pool, which is not
// empty and in config order.
func (s *Selector) decide(pool []int, prev int, ms []matches) pick {
	switch s.strategy {
	case config.StrategyPriority:
		return s.byPriority(pool, ms)
	case config.StrategyRouter:
		return s.route(pool, prev, ms)
	}
	return s.roundRobin(pool, prev)
}

// roundRobin picks the first member of pool after prev in config order,
// wrapping around.
func (s *Selector) roundRobin(pool []int, prev int) pick {
	if prev < 0 {
		return pick{pool[0], config.StrategyRoundRobin, "first in turn"}
	}
	for _, i := range pool {
		if i > prev {
			return pick{i, config.StrategyRoundRobin, "next in turn"}
		}
	}
	return pick{pool[0], config.StrategyRoundRobin, "next in turn"}
}

// byPriority picks the matching member of highest priority, else the
// member of highest priority.
func (s *Selector) byPriority(pool []int, ms []matches) pick {
	best := -1
	for _, i := range pool {
		if ms[i].score > 0 && (best < 0 || s.members[i].priority > s.members[best].priority) {
			best = i
		}
	}
	if best >= 0 {
		return pick{best, config.StrategyPriority, ms[best].String() + " matched"}
	}
	top := pool[0]
	for _, i := range pool[1:] {
		if s.members[i].priority > s.members[top].priority {
			top = i
		}
	}
	return pick{top, config.StrategyPriority, "no keyword or pattern matched; highest priority"}
}

// route picks the member of best score, else the default member, else
// round robin.
func (s *Selector) route(pool []int, prev int, ms []matches) pick {
	best := -1
	for _, i := range pool {
		sc := ms[i].score
		if sc == 0 {
			continue
		}
		if best < 0 || sc > ms[best].score || (sc == ms[best].score && s.members[i].priority > s.members[best].priority) {
			best = i
		}
	}
	if best >= 0 {
		return pick{best, config.StrategyRouter, fmt.Sprintf("%s matched (score %d)", ms[best], ms[best].score)}
	}
	if s.def >= 0 && slices.Contains(pool, s.def) {
		return pick{s.def, config.StrategyRouter, "no keyword or pattern matched; default " + s.members[s.def].name}
	}
	p := s.roundRobin(pool, prev)
	if s.def >= 0 {
		p.reason = fmt.Sprintf("no keyword or pattern matched and the default %s may not speak now; round robin: %s", s.members[s.def].name, p.reason)
	} else {
		p.reason = "no keyword or pattern matched; round robin: " + p.reason
	}
	return p
}

// matches are the keywords and patterns of one member that match a
// message, the tools of the last turn its after_tools match, and the
// router's score: +1 a keyword, +2 a pattern, +3 a tool (what a turn did
// says more than the words it used).
type matches struct {
	keywords []string
	patterns []string
	tools    []string
	score    int
}

// String lists the matches: `keyword "deploy"`, `keywords "a", "b" and
// pattern "p"`.
func (m matches) String() string {
	var parts []string
	if len(m.keywords) > 0 {
		parts = append(parts, quoteList("keyword", m.keywords))
	}
	if len(m.patterns) > 0 {
		parts = append(parts, quoteList("pattern", m.patterns))
	}
	if len(m.tools) > 0 {
		parts = append(parts, "the last turn's "+quoteList("call", m.tools))
	}
	return strings.Join(parts, " and ")
}

func quoteList(noun string, items []string) string {
	if len(items) > 1 {
		noun += "s"
	}
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = fmt.Sprintf("%q", it)
	}
	return noun + " " + strings.Join(q, ", ")
}

// match matches msg against the keywords and patterns of the members in
// set; the result is indexed by member.
func (s *Selector) match(msg string, tools []string, set []int) []matches {
	ms := make([]matches, len(s.members))
	text := normalize(msg)
	for _, i := range set {
		m := &s.members[i]
		for _, tool := range tools {
			if slices.ContainsFunc(m.tools, func(p string) bool { ok, _ := path.Match(p, tool); return ok }) && !slices.Contains(ms[i].tools, tool) {
				ms[i].tools = append(ms[i].tools, tool)
				ms[i].score += 3
			}
		}
		for _, k := range m.keywords {
			if containsWord(text, k) {
				ms[i].keywords = append(ms[i].keywords, k)
				ms[i].score++
			}
		}
		for _, re := range m.patterns {
			if re.MatchString(msg) {
				ms[i].patterns = append(ms[i].patterns, re.String())
				ms[i].score += 2
			}
		}
	}
	return ms
}

// normalize lowers s and makes each run of spaces one space, trimmed.
func normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// containsWord reports whether text holds kw as a whole word: not
// preceded or followed by a letter, digit or '_' where kw starts or ends
// with one.
func containsWord(text, kw string) bool {
	first, _ := utf8.DecodeRuneInString(kw)
	lastR, _ := utf8.DecodeLastRuneInString(kw)
	for off := 0; off <= len(text); {
		i := strings.Index(text[off:], kw)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(kw)
		before, _ := utf8.DecodeLastRuneInString(text[:i])
		after, _ := utf8.DecodeRuneInString(text[j:])
		if (i == 0 || !isWordRune(first) || !isWordRune(before)) &&
			(j == len(text) || !isWordRune(lastR) || !isWordRune(after)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		off = i + size
	}
	return false
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// askModel lets the selector model choose among pool; round robin decides
// when the call fails or the answer names no candidate.
func (s *Selector) askModel(ctx context.Context, pool []int, prev int, t Turn) (pick, error) {
	resp, err := s.llm.Generate(ctx, s.selectorRequest(pool, t))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return pick{}, ctxErr
		}
		p := s.roundRobin(pool, prev)
		p.reason = fmt.Sprintf("selector failed: %s; round robin", clip(err.Error(), 200))
		return p, nil
	}
	i, bad := s.parseAnswer(resp.Text, pool)
	if bad != "" {
		p := s.roundRobin(pool, prev)
		p.reason = fmt.Sprintf("selector answered %q: %s; round robin", clip(strings.TrimSpace(resp.Text), 80), bad)
		return p, nil
	}
	return pick{i, config.StrategyLLM, "selector chose " + s.members[i].name}, nil
}

// selectorRequest is the llm strategy's request: see the comment at the
// top of the file.
func (s *Selector) selectorRequest(pool []int, t Turn) llm.Request {
	var sel llm.Selection
	for _, i := range pool {
		sel.Participants = append(sel.Participants, llm.Participant{Name: s.members[i].name, Description: s.members[i].desc})
	}
	h := t.History
	if len(h) > historyLimit {
		h = h[len(h)-historyLimit:]
	}
	for _, m := range h {
		if m.Role == string(llm.RoleAssistant) {
			sel.History = append(sel.History, llm.Message{Role: llm.RoleAssistant, Name: m.Name, Content: m.Content})
			continue
		}
		sel.History = append(sel.History, llm.Message{Role: llm.RoleUser, Content: m.Content})
	}
	if len(sel.History) == 0 && strings.TrimSpace(t.Message) != "" {
		sel.History = append(sel.History, llm.Message{Role: llm.RoleUser, Content: t.Message})
	}
	return sel.Request(s.prompt)
}

// parseAnswer finds the candidate a selector's answer names: the whole
// answer, trimmed of punctuation, quotes and markdown, as a name (any
// case), else the one candidate named in it as a whole word. bad says
// what is wrong with any other answer.
func (s *Selector) parseAnswer(text string, pool []int) (member int, bad string) {
	ans := strings.TrimSpace(text)
	if ans == "" {
		return -1, "empty answer"
	}
	for _, name := range []string{
		ans,
		strings.TrimFunc(ans, func(r rune) bool { return !isNameRune(r) }),
		strings.TrimFunc(ans, func(r rune) bool { return !isNameRune(r) || r == '_' || r == '-' }),
	} {
		for i, m := range s.members {
			if strings.EqualFold(name, m.name) {
				if slices.Contains(pool, i) {
					return i, ""
				}
				return -1, m.name + " may not speak now"
			}
		}
	}
	low := strings.ToLower(ans)
	found, other := -1, -1
	for i, m := range s.members {
		if !containsName(low, strings.ToLower(m.name)) {
			continue
		}
		if !slices.Contains(pool, i) {
			if other < 0 {
				other = i
			}
			continue
		}
		if found >= 0 {
			return -1, "names several participants"
		}
		found = i
	}
	switch {
	case found >= 0:
		return found, ""
	case other >= 0:
		return -1, s.members[other].name + " may not speak now"
	}
	return -1, "not a participant"
}

// isNameRune reports whether r may be in an agent name.
func isNameRune(r rune) bool {
	return r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

// containsName reports whether text holds name with no name character on
// either side.
func containsName(text, name string) bool {
	for off := 0; off <= len(text); {
		i := strings.Index(text[off:], name)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(name)
		if (i == 0 || !isNameRune(rune(text[i-1]))) && (j == len(text) || !isNameRune(rune(text[j]))) {
			return true
		}
		off = i + 1
	}
	return false
}

// clip cuts s to at most n bytes, on a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
