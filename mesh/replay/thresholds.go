package replay

import "fmt"

// Exceeded says which thresholds totals go over, one line each, in a
// fixed order; none when every one holds.
func (th Thresholds) Exceeded(totals Counts) []string {
	var out []string
	check := func(name string, limit, got int) {
		if limit >= 0 && got > limit {
			out = append(out, fmt.Sprintf("%s: %d > %d", name, got, limit))
		}
	}
	check("different calls", th.MaxDifferentCalls, totals.DifferentCalls)
	check("added calls", th.MaxAddedCalls, totals.AddedCalls)
	check("missing calls", th.MaxMissingCalls, totals.MissingCalls)
	check("proposed calls", th.MaxProposedCalls, totals.ProposedCalls)
	check("failed turns", th.MaxFailedTurns, totals.FailedTurns)
	if th.MaxChangedAnswers >= 0 && totals.ChangedRatio() > th.MaxChangedAnswers {
		out = append(out, fmt.Sprintf("changed answers: %d of %d (%.3f) > %.3f", totals.ChangedAnswers, totals.ComparedAnswers, totals.ChangedRatio(), th.MaxChangedAnswers))
	}
	return out
}
