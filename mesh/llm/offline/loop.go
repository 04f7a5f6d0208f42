package offline

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds the offline planner's loop goals: "at least N <things>"
// reached with a list tool, a create tool and exit_loop.

// exitLoopTool is the tool loop nodes give the agents that may end them.
const exitLoopTool = "exit_loop"

// loopGoal is "at least n <noun>".
type loopGoal struct {
	n    int
	noun string // singular stem
}

const numberWord = `(\d+|one|two|three|four|five|six|seven|eight|nine|ten)`

// goalPatterns find a goal; group 1 is the number, group 2 the words after.
var goalPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bat\s+least\s+` + numberWord + `\s+((?:[a-z][\w-]*\s*){1,3})`),
	regexp.MustCompile(`(?i)\b` + numberWord + `\s+or\s+more\s+((?:[a-z][\w-]*\s*){1,3})`),
	regexp.MustCompile(`(?i)\bminimum\s+of\s+` + numberWord + `\s+((?:[a-z][\w-]*\s*){1,3})`),
}

// findGoal finds the first goal in texts, in order.
func findGoal(texts ...string) (loopGoal, bool) {
	for _, t := range texts {
		for _, re := range goalPatterns {
			m := re.FindStringSubmatch(t)
			if m == nil {
				continue
			}
			n, err := strconv.Atoi(m[1])
			if err != nil {
				n = smallNumbers[strings.ToLower(m[1])]
			}
			for _, w := range strings.Fields(strings.ToLower(m[2])) {
				if !fillers[w] {
					return loopGoal{n: n, noun: stem(w)}, n > 0
				}
			}
		}
	}
	return loopGoal{}, false
}

// planLoop plans one step towards a goal when the tools include
// exit_loop and the user's message (or else the system prompt) states a
// goal, and there are a read tool and a create tool for the goal's noun:
//
//   - nothing done yet in this iteration: call the read tool;
//   - the last list shows at least n (counting what was created since):
//     call exit_loop;
//   - fewer, nothing created yet: call the create tool for the next one,
//     named "<noun>-<k>" with value k*10, k = count+1;
//   - fewer, one created: reply with text, ending the iteration;
//   - a failure or rejection: report it.
//
// ok is false when the loop rules do not apply.
func planLoop(user, system string, results []llm.Message, tools []*toolProfile) (reply, bool) {
	var exit *toolProfile
	for _, p := range tools {
		if p.tool.Name == exitLoopTool {
			exit = p
		}
	}
	if exit == nil {
		return reply{}, false
	}
	g, ok := findGoal(user, system)
	if !ok {
		return reply{}, false
	}
	list, create := pickFor(tools, intentRead, g.noun), pickFor(tools, intentCreate, g.noun)
	if list == nil || create == nil {
		return reply{}, false
	}
	byName := indexTools(tools)
	nouns := plural(g.noun, g.n)
	if len(results) > 0 && results[len(results)-1].ToolName == exitLoopTool {
		return reply{text: fmt.Sprintf("The goal is reached: there are at least %d %s, so the loop ends.", g.n, nouns)}, true
	}
	lastList := -1
	for i, m := range results {
		if m.ToolName == list.tool.Name {
			lastList = i
		}
	}
	if lastList < 0 {
		return reply{tool: list.tool.Name, args: map[string]any{}}, true
	}
	lr := results[lastList]
	if lr.IsError || isRejection(lr.Content) {
		return reply{text: reportResults(results[lastList:], byName)}, true
	}
	have, names, ok := listCount(lr.Content, g.noun)
	if !ok {
		return reply{text: fmt.Sprintf("I could not count the %s in the result of %s, so I cannot tell whether there are at least %d.\n\n%s",
			plural(g.noun, 2), list.tool.Name, g.n, reportResults(results[lastList:lastList+1], byName))}, true
	}
	added := 0
	for _, m := range results[lastList+1:] {
		if m.ToolName != create.tool.Name {
			continue
		}
		if m.IsError || isRejection(m.Content) {
			return reply{text: reportResults(results[lastList+1:], byName)}, true
		}
		added++
	}
	have += added
	switch {
	case have >= g.n:
		reason := fmt.Sprintf("goal reached: %d of at least %d %s", have, g.n, nouns)
		return reply{tool: exit.tool.Name, args: fillExit(exit.schema, reason, have)}, true
	case added > 0:
		return reply{text: fmt.Sprintf("Added one %s: there are now %d of the %d %s wanted.", g.noun, have, g.n, nouns)}, true
	}
	k := have + 1
	return reply{tool: create.tool.Name, args: synthesize(create.schema, g.noun, k, names)}, true
}

// pickFor is the tool with intent in that works on noun: named after it
// first, then mentioning it in its description; fewer required
// properties, then list order, break ties.
func pickFor(tools []*toolProfile, in intent, noun string) *toolProfile {
	var best *toolProfile
	bestRank := 0
	for _, p := range tools {
		if !p.intents.has(in) {
			continue
		}
		rank := 0
		switch {
		case p.nouns[noun]:
			rank = 2000
		case p.descWords[noun]:
			rank = 1000
		default:
			continue
		}
		rank -= 10 * requiredCount(p.schema)
		if best == nil || rank > bestRank {
			best, bestRank = p, rank
		}
	}
	return best
}

func requiredCount(s *argSchema) int {
	n := 0
	for _, p := range s.props {
		if p.required {
			n++
		}
	}
	return n
}

// synthesize makes the arguments to create the k-th <noun>: names are
// "<noun>-<k>" (a higher number when taken already lists that name),
// numbers k*10; other required properties get empty or first values.
func synthesize(s *argSchema, noun string, k int, taken map[string]bool) map[string]any {
	name := fmt.Sprintf("%s-%d", noun, k)
	for i := k + 1; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d", noun, i)
	}
	args := map[string]any{}
	for _, p := range s.props {
		switch p.kind {
		case kindName:
			args[p.name] = name
		case kindInteger:
			if p.required || p.head == "value" {
				args[p.name] = int64(k * 10)
			}
		case kindNumber:
			if p.required || p.head == "value" {
				args[p.name] = float64(k * 10)
			}
		case kindString, kindID, kindPath, kindPattern, kindQuery, kindMessage:
			if p.required {
				args[p.name] = name
			}
		case kindEnum:
			if p.required && len(p.s.enum) > 0 {
				args[p.name] = p.s.enum[0]
			}
		case kindBool:
			if p.required {
				args[p.name] = false
			}
		case kindObject:
			if p.required {
				args[p.name] = synthesize(p.s, noun, k, taken)
			}
		case kindArray:
			switch {
			case p.itemKind == kindName:
				args[p.name] = []any{name}
			case p.itemKind == kindObject && p.s.items != nil:
				args[p.name] = []any{synthesize(p.s.items, noun, k, taken)}
			case p.required:
				args[p.name] = []any{}
			}
		}
	}
	return args
}

// fillExit fills exit_loop's required properties, if it has any: text
// gets the reason, numbers the count, booleans true.
func fillExit(s *argSchema, reason string, have int) map[string]any {
	args := map[string]any{}
	for _, p := range s.props {
		if !p.required {
			continue
		}
		switch p.kind {
		case kindInteger, kindNumber:
			args[p.name] = have
		case kindBool:
			args[p.name] = true
		case kindEnum:
			args[p.name] = p.s.enum[0]
		case kindArray:
			args[p.name] = []any{}
		case kindObject:
			args[p.name] = map[string]any{}
		default:
			args[p.name] = reason
		}
	}
	return args
}
