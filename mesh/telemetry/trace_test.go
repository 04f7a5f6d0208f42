package telemetry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestDestinationTemplateHidesIDs(t *testing.T) {
	for subject, want := range map[string]string{
		"mesh.work.agent.resource-manager.0b64f907-f477-4e1a-a531-e643becd27bd": "mesh.work.agent.resource-manager.{conversation}",
		"acme.work.group.team.c1":                                    "acme.work.group.team.{conversation}",
		"mesh.approval.08ae76b7-5b0b-5cad-930a-e77ec22f9dc1.request": "mesh.approval.{approval}.request",
		"mesh.tool.resources.resources_list":                         "mesh.tool.resources.resources_list",
		"mesh.work.agent":                                            "mesh.work.agent",
	} {
		if got := DestinationTemplate(subject); got != want {
			t.Errorf("DestinationTemplate(%s) = %s, want %s", subject, got, want)
		}
	}
}

// With OTEL_TRACES_SAMPLER unset, a tenth of the traces that start here are
// sampled and a caller's decision is followed; set, the SDK decides.
func TestDefaultSamplerTakesATenthOfRootTraces(t *testing.T) {
	if sampler(true) != nil {
		t.Error("a sampler was installed over OTEL_TRACES_SAMPLER")
	}
	s := sampler(false)
	rng := rand.New(rand.NewPCG(1, 2))
	sampled := 0
	const n = 20000
	for range n {
		var id trace.TraceID
		binary.BigEndian.PutUint64(id[:8], rng.Uint64())
		binary.BigEndian.PutUint64(id[8:], rng.Uint64())
		r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id, Name: "turn"})
		if r.Decision == sdktrace.RecordAndSample {
			sampled++
		}
	}
	if share := float64(sampled) / n; share < 0.08 || share > 0.12 {
		t.Errorf("%.3f of root traces sampled, want about %.2f", share, DefaultSampleRatio)
	}
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true}))
	for i := range 50 {
		r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: parent, TraceID: trace.TraceID{1}, Name: fmt.Sprint("step", i)})
		if r.Decision != sdktrace.RecordAndSample {
			t.Fatal("a span of a caller's sampled trace was dropped")
		}
	}
}
