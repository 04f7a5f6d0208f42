package models

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// observed is a provider whose calls are counted (mesh_model_*) and
// traced (a client span per call, a child of the turn's).
type observed struct {
	llm.Provider
	provider, model string
}

func observe(p llm.Provider, m modelspec.Model) llm.Provider {
	telemetry.ModelEndpoint(m.Provider, m.Name, []string{llm.CodeTimeout, llm.CodeRateLimit, llm.CodeError})
	return &observed{Provider: p, provider: m.Provider, model: m.Name}
}

func (o *observed) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	start := time.Now()
	// Named and described as the OpenTelemetry GenAI conventions say.
	ctx, span := telemetry.StartKind(ctx, "chat "+o.model, trace.SpanKindClient,
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", telemetry.GenAIProvider(o.provider)),
		attribute.String("gen_ai.request.model", o.model))
	resp, err := o.Provider.Generate(ctx, req)
	var tok telemetry.Tokens
	if resp != nil {
		u := resp.Usage
		tok = telemetry.Tokens{Input: u.InputTokens, Output: u.OutputTokens, Cached: u.CachedTokens, CacheWrite: u.CacheWriteTokens}
		span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", u.InputTokens), attribute.Int("gen_ai.usage.output_tokens", u.OutputTokens))
		if u.CachedTokens > 0 {
			span.SetAttributes(attribute.Int("gen_ai.usage.cache_read.input_tokens", u.CachedTokens))
		}
		if u.CacheWriteTokens > 0 {
			span.SetAttributes(attribute.Int("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteTokens))
		}
		if resp.StopReason != "" {
			span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.StopReason}))
		}
	}
	code := ""
	if err != nil {
		code = llm.CodeError
		var le *llm.Error
		if errors.As(err, &le) {
			code = le.Code
		} else if errors.Is(err, context.Canceled) {
			code = "cancelled"
		}
	}
	telemetry.ModelCall(ctx, o.provider, o.model, time.Since(start), tok, code)
	telemetry.End(span, err)
	return resp, err
}
