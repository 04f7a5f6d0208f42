package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// turnHops are the legs of a turn at one conversation, between points of
// its trace: the bridge's request span, the agent's work item and tool
// call, the tool host's request and its MCP call. Their medians add up to
// about the bridge's p50.
var turnHops = []struct {
	name string
	leg  func(tl turnTimeline) time.Duration
}{
	// The queue record, run_queued, the work item and its delivery.
	{"queue", func(tl turnTimeline) time.Duration { return tl.turn.start.Sub(tl.request.start) }},
	// The session read, the first model call, the events.
	{"before-tool", func(tl turnTimeline) time.Duration { return tl.tool.start.Sub(tl.turn.start) }},
	// The agent's request through the server to the tool host's handler.
	{"to-toolhost", func(tl turnTimeline) time.Duration { return tl.host.start.Sub(tl.tool.start) }},
	// The tool host's tools/call on the MCP server, over stdio.
	{"mcp", func(tl turnTimeline) time.Duration { return tl.mcp.end.Sub(tl.mcp.start) }},
	// The tool host's handler but the MCP call.
	{"toolhost-rest", func(tl turnTimeline) time.Duration {
		return tl.host.end.Sub(tl.host.start) - tl.mcp.end.Sub(tl.mcp.start)
	}},
	// The tool host's answer back to the agent.
	{"from-toolhost", func(tl turnTimeline) time.Duration { return tl.tool.end.Sub(tl.host.end) }},
	// The second model call, the save, the run's end and its acks.
	{"after-tool", func(tl turnTimeline) time.Duration { return tl.turn.end.Sub(tl.tool.end) }},
	// RUN_FINISHED to the bridge, its page of the conversation, the answer.
	{"answer", func(tl turnTimeline) time.Duration { return tl.request.end.Sub(tl.turn.end) }},
}

// turnTimeline is the spans of one turn's trace that turnHops measure.
type turnTimeline struct {
	request, turn, tool, host, mcp *span
}

// timelineOf finds the spans of one turn in a trace's spans, or false.
func timelineOf(spans []span) (turnTimeline, bool) {
	tl := turnTimeline{
		request: find(spans, "mesh-bridge", "POST /conversations/{id}/messages"),
		turn:    find(spans, "mesh-agent", "process mesh.work.agent."),
		tool:    find(spans, "mesh-agent", "execute_tool resources_"),
		host:    find(spans, "mesh-toolhost", "process mesh.tool.resources."),
		mcp:     find(spans, "mesh-toolhost", "tools/call"),
	}
	return tl, tl.request != nil && tl.turn != nil && tl.tool != nil && tl.host != nil && tl.mcp != nil
}

// BenchmarkTurnTimeline follows turns at one conversation (the offline
// planner, one resources_list call each) through their traces: every
// process exports its spans to a receiver in the test, and the median of
// each leg of turnHops is reported (`<leg>-ms`), with the bridge's own
// span (`request-ms`). Where BenchmarkTurnCPU says what a turn costs, this
// says where its latency goes, hop by hop; the spans' export adds a little
// to each process's work, so the legs add up to a little more than
// BenchmarkTurnCPU's p50 at 1.
func BenchmarkTurnTimeline(b *testing.B) {
	rec := startOTLP(b)
	m := startMesh(b, meshOpts{logLevel: "warn", env: rec.traceEnv()})
	m.send(m.newConversation(), "list all resources") // warm up
	turns := max(b.N, 100)
	client := turnClient(1)
	defer client.CloseIdleConnections()
	b.ResetTimer()
	conv := ""
	for i := range turns {
		if i%10 == 0 {
			conv = m.newConversation()
		}
		if status, body, err := post(client, m.url("/conversations/"+conv+"/messages"), map[string]any{"message": "list all resources"}); err != nil || status != 200 {
			b.Fatalf("turn: %d %v %.300s", status, err, body)
		}
	}
	b.StopTimer()
	var tls []turnTimeline
	meshtest.Eventually(b, 30*time.Second, func() bool {
		tls = rec.timelines()
		return len(tls) > turns // and the warm-up's
	}, "the traces of %d turns did not all arrive", turns+1)
	var line []string
	var sum float64
	for _, h := range turnHops {
		d := make([]time.Duration, 0, len(tls))
		for _, tl := range tls {
			d = append(d, h.leg(tl))
		}
		med := quantileMs(d, 0.5)
		b.ReportMetric(med, h.name+"-ms")
		sum += med
		line = append(line, fmt.Sprintf("%s %.3f", h.name, med))
	}
	req := make([]time.Duration, 0, len(tls))
	for _, tl := range tls {
		req = append(req, tl.request.end.Sub(tl.request.start))
	}
	reqMed := quantileMs(req, 0.5)
	b.ReportMetric(reqMed, "request-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d turns, median ms: %s (sum %.3f); the bridge's request %.3f", len(tls), strings.Join(line, ", "), sum, reqMed)
}

// timelines are the turns r has every span of, one per trace.
func (r *otlpReceiver) timelines() []turnTimeline {
	r.mu.Lock()
	byTrace := map[string][]span{}
	for _, s := range r.spans {
		byTrace[s.trace] = append(byTrace[s.trace], s)
	}
	r.mu.Unlock()
	var out []turnTimeline
	for _, spans := range byTrace {
		if tl, ok := timelineOf(spans); ok {
			out = append(out, tl)
		}
	}
	return out
}
