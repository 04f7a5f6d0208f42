package replay

import (
	"encoding/json"
	"html/template"
	"io"
)

// WriteHTML writes r as a page of its own: the totals and thresholds, then
// each conversation's turns with the recorded and replayed answers side by
// side and every compared call.
func WriteHTML(w io.Writer, r *Report) error {
	return page.Execute(w, r)
}

// WriteListHTML writes a page listing reports, each linking to its own
// page under base (base + id).
func WriteListHTML(w io.Writer, list []Summary, base string) error {
	return listPage.Execute(w, struct {
		List []Summary
		Base string
	}{list, base})
}

var funcs = template.FuncMap{
	"args": func(a map[string]any) string {
		if len(a) == 0 {
			return "{}"
		}
		b, _ := json.Marshal(a)
		return string(b)
	},
	"pct": func(c Counts) float64 { return 100 * c.ChangedRatio() },
}

const style = `<style>
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top;text-align:left}
.side{display:grid;grid-template-columns:1fr 1fr;gap:.5rem}
.side pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem;margin:0}
.same{color:#276127}.different{color:#8a5a00}.added{color:#1f4fa0}.missing{color:#a02020}
.exceeded{color:#a02020;font-weight:bold}
section{border-top:1px solid #ddd;margin-top:1rem}
</style>`

var page = template.Must(template.New("report").Funcs(funcs).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Replay {{.ID}}</title>` + style + `</head><body>
<h1>Replay {{.ID}}</h1>
<p>{{.Selection}} against <b>{{.Config}}</b> (model {{.Model}}), {{.StartedAt.Format "2006-01-02 15:04:05 MST"}} to {{.FinishedAt.Format "15:04:05"}}. Calls that are not read-only were answered with: <code>{{.StandIn}}</code></p>
{{if .Exceeded}}<p class="exceeded" id="exceeded">Thresholds exceeded: {{range .Exceeded}}{{.}}; {{end}}</p>{{else}}<p id="within">Within the thresholds.</p>{{end}}
{{if .Trimmed}}<p>This stored copy leaves out the turns' texts; the counts are whole.</p>{{end}}
<table id="totals"><tr><th>conversations</th><th>turns</th><th>same calls</th><th>different</th><th>added</th><th>missing</th><th>proposed (not run)</th><th>changed answers</th><th>failed turns</th><th>p50 ms</th><th>p99 ms</th><th>tokens in/out</th>{{if .Cost}}<th>cost</th>{{end}}</tr>
<tr><td>{{len .Conversations}}</td><td>{{.Totals.Turns}}</td><td>{{.Totals.SameCalls}}</td><td>{{.Totals.DifferentCalls}}</td><td>{{.Totals.AddedCalls}}</td><td>{{.Totals.MissingCalls}}</td><td>{{.Totals.ProposedCalls}}</td><td>{{.Totals.ChangedAnswers}} of {{.Totals.ComparedAnswers}} ({{printf "%.1f" (pct .Totals)}} %)</td><td>{{.Totals.FailedTurns}}</td><td>{{printf "%.0f" .Latency.P50}}</td><td>{{printf "%.0f" .Latency.P99}}</td><td>{{.Usage.InputTokens}} / {{.Usage.OutputTokens}}</td>{{if .Cost}}<td>{{printf "%.4f" .Cost}} {{.Prices.Currency}}</td>{{end}}</tr></table>
{{range .Conversations}}<section class="conversation">
<h2>{{.Source}}</h2>
{{if .Error}}<p class="exceeded">{{.Error}}</p>{{end}}
<p>same {{.Counts.SameCalls}}, different {{.Counts.DifferentCalls}}, added {{.Counts.AddedCalls}}, missing {{.Counts.MissingCalls}}, proposed {{.Counts.ProposedCalls}}; changed answers {{.Counts.ChangedAnswers}}; p50 {{printf "%.0f" .Latency.P50}} ms, p99 {{printf "%.0f" .Latency.P99}} ms; tokens {{.Usage.InputTokens}} / {{.Usage.OutputTokens}}</p>
{{range .Turns}}<h3>Turn {{.Index}}{{if .AnswerChanged}} (answer changed){{end}}</h3>
<p><b>User:</b> {{.User}}</p>
{{if .Error}}<p class="exceeded">{{.Error}}</p>{{end}}
<div class="side"><div><b>Recorded</b><pre>{{.Original}}</pre></div><div><b>Replay</b> ({{printf "%.0f" .LatencyMS}} ms)<pre>{{.Replay}}</pre></div></div>
{{if .Calls}}<table><tr><th>#</th><th>compared</th><th>recorded</th><th>replay</th></tr>
{{range .Calls}}<tr><td>{{.Position}}</td><td class="{{.Kind}}">{{.Kind}}</td><td>{{with .Original}}{{.Tool}} <code>{{args .Arguments}}</code>{{end}}</td><td>{{with .Replay}}{{.Tool}} <code>{{args .Arguments}}</code>{{if .StandIn}} (not run){{end}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{end}}</section>
{{end}}</body></html>
`))

var listPage = template.Must(template.New("list").Funcs(funcs).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Replays</title>` + style + `</head><body>
<h1>Replays</h1>
{{if not .List}}<p>No replay has stored a report.</p>{{else}}<table><tr><th>id</th><th>started</th><th>model</th><th>config</th><th>conversations</th><th>different / added / missing / proposed</th><th>changed answers</th><th>thresholds</th></tr>
{{range .List}}<tr><td><a href="{{$.Base}}{{.ID}}">{{.ID}}</a></td><td>{{.StartedAt.Format "2006-01-02 15:04"}}</td><td>{{.Model}}</td><td>{{.Config}}</td><td>{{.Conversations}}</td><td>{{.Totals.DifferentCalls}} / {{.Totals.AddedCalls}} / {{.Totals.MissingCalls}} / {{.Totals.ProposedCalls}}</td><td>{{.Totals.ChangedAnswers}} of {{.Totals.ComparedAnswers}}</td><td>{{if .Exceeded}}<span class="exceeded">exceeded</span>{{else}}held{{end}}</td></tr>
{{end}}</table>{{end}}</body></html>
`))
