package replay

import (
	"bytes"
	"math"
	"sort"
	"strings"

	"github.com/agentmesh/agentmesh/mesh"
)

// CompareCalls compares a recorded turn's calls with its replay's, by
// position (see the package doc).
func CompareCalls(original, replayed []Call) []CallDiff {
	var out []CallDiff
	for k := 0; k < max(len(original), len(replayed)); k++ {
		switch {
		case k >= len(replayed):
			out = append(out, CallDiff{Position: k, Kind: CallMissing, Original: &original[k]})
		case k >= len(original):
			out = append(out, CallDiff{Position: k, Kind: CallAdded, Replay: &replayed[k]})
		case original[k].Tool != replayed[k].Tool:
			out = append(out, CallDiff{Position: k, Kind: CallMissing, Original: &original[k]},
				CallDiff{Position: k, Kind: CallAdded, Replay: &replayed[k]})
		case sameArguments(original[k].Arguments, replayed[k].Arguments):
			out = append(out, CallDiff{Position: k, Kind: CallSame, Original: &original[k], Replay: &replayed[k]})
		default:
			out = append(out, CallDiff{Position: k, Kind: CallDifferent, Original: &original[k], Replay: &replayed[k]})
		}
	}
	return out
}

// sameArguments compares arguments as canonical JSON: key order and number
// spelling aside. Empty and absent arguments are the same.
func sameArguments(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	ja, err1 := mesh.CanonicalJSON(a)
	jb, err2 := mesh.CanonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// CompareTurn compares turn index of a recording (original, nil when the
// recording has no such turn) with its replay (nil when the replay did not
// get that far). recorded says original carries the recording's answer and
// calls; a turn of a JSONL file has only its user message, so neither its
// calls nor its answer are compared.
func CompareTurn(index int, original, replayed *Turn, recorded bool) TurnReport {
	tr := TurnReport{Index: index}
	var orig, rep []Call
	if original != nil {
		tr.User = original.User
		if recorded {
			tr.Original = original.Answer
			orig = original.Calls
		}
	}
	if replayed != nil {
		if tr.User == "" {
			tr.User = replayed.User
		}
		tr.Replay = replayed.Answer
		rep = replayed.Calls
		for _, c := range rep {
			if c.StandIn {
				tr.Proposed = append(tr.Proposed, c)
			}
		}
	}
	tr.Counts.Turns = 1
	tr.Counts.ProposedCalls = len(tr.Proposed)
	if recorded {
		tr.Calls = CompareCalls(orig, rep)
		for _, d := range tr.Calls {
			switch d.Kind {
			case CallSame:
				tr.Counts.SameCalls++
			case CallDifferent:
				tr.Counts.DifferentCalls++
			case CallAdded:
				tr.Counts.AddedCalls++
			case CallMissing:
				tr.Counts.MissingCalls++
			}
		}
		if original != nil {
			tr.Counts.ComparedAnswers = 1
			if replayed == nil || strings.TrimSpace(original.Answer) != strings.TrimSpace(replayed.Answer) {
				tr.AnswerChanged = true
				tr.Counts.ChangedAnswers = 1
			}
		}
	}
	return tr
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of
// values, 0 for none.
func Percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// LatencyOf is the distribution of durations in milliseconds.
func LatencyOf(ms []float64) Latency {
	l := Latency{Turns: len(ms), P50: Percentile(ms, 50), P99: Percentile(ms, 99)}
	for _, v := range ms {
		l.Max = max(l.Max, v)
	}
	return l
}

// Finish fills a conversation's counts, latency, usage and cost from its
// turns.
func (c *ConversationReport) Finish(p *Prices) {
	c.Counts = Counts{}
	c.Usage = mesh.Usage{}
	var ms []float64
	for _, t := range c.Turns {
		c.Counts.Add(t.Counts)
		if t.Usage != nil {
			c.Usage.InputTokens += t.Usage.InputTokens
			c.Usage.OutputTokens += t.Usage.OutputTokens
		}
		if t.LatencyMS > 0 {
			ms = append(ms, t.LatencyMS)
		}
	}
	c.Latency = LatencyOf(ms)
	if p != nil {
		cost := p.Cost(c.Usage)
		c.Cost = &cost
	}
}

// Finish adds up the conversations (each already finished) into the
// totals, the latency over every turn, the usage and the cost, and checks
// the thresholds.
func (r *Report) Finish() {
	r.Totals = Counts{}
	r.Usage = mesh.Usage{}
	var ms []float64
	for _, c := range r.Conversations {
		r.Totals.Add(c.Counts)
		r.Usage.InputTokens += c.Usage.InputTokens
		r.Usage.OutputTokens += c.Usage.OutputTokens
		for _, t := range c.Turns {
			if t.LatencyMS > 0 {
				ms = append(ms, t.LatencyMS)
			}
		}
	}
	r.Latency = LatencyOf(ms)
	if r.Prices != nil {
		cost := r.Prices.Cost(r.Usage)
		r.Cost = &cost
	}
	r.Exceeded = r.Thresholds.Exceeded(r.Totals)
}
