package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// startTelemetry serves the process's metrics on metrics.listen (none when
// empty), and installs the tracer provider and the OTLP metrics push the
// OTEL_* environment asks for.
// It returns the metrics address (for heartbeats) and the function that
// stops both, flushing the spans still buffered.
func startTelemetry(ctx context.Context, cfg *config.Config, role, nodeID string, breakers func() map[string]string, log zerolog.Logger) (string, func(), error) {
	telemetry.SetBuild(version, role)
	telemetry.OnError(func(err error) { log.Warn().Err(err).Msg("opentelemetry") })
	telemetry.WatchBreakers(breakers)
	mctx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	addr := ""
	if cfg.Metrics.Listen != "" {
		var err error
		if addr, err = telemetry.Serve(mctx, cfg.Metrics.Listen); err != nil {
			stopMetrics()
			return "", nil, fmt.Errorf("%w: metrics.listen: %w", errConfig, err)
		}
		log.Info().Str("addr", addr).Msg("metrics listening")
	}
	shutdown, err := telemetry.Setup(ctx, telemetry.TraceConfig{
		Endpoint: cfg.Telemetry.Endpoint, Protocol: cfg.Telemetry.Protocol, Service: "mesh-" + role, Node: nodeID,
		SamplerSet: cfg.Telemetry.Sampler != "",
	})
	if err != nil {
		stopMetrics()
		return "", nil, fmt.Errorf("%w: OpenTelemetry: %w", errConfig, err)
	}
	if cfg.Telemetry.Tracing() {
		log.Info().Str("endpoint", cfg.Telemetry.Endpoint).Str("protocol", cfg.Telemetry.Protocol).Msg("tracing on")
	}
	stopPush, err := telemetry.SetupMetrics(ctx, telemetry.MetricsConfig{
		Endpoint: cfg.Telemetry.MetricsEndpoint, Protocol: cfg.Telemetry.MetricsProtocol, Service: "mesh-" + role, Node: nodeID,
	})
	if err != nil {
		stopMetrics()
		return "", nil, fmt.Errorf("%w: OpenTelemetry metrics: %w", errConfig, err)
	}
	if cfg.Telemetry.PushingMetrics() {
		log.Info().Str("endpoint", cfg.Telemetry.MetricsEndpoint).Str("protocol", cfg.Telemetry.MetricsProtocol).Msg("metrics pushed over OTLP")
	}
	return addr, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("flush traces")
		}
		if err := stopPush(sctx); err != nil {
			log.Warn().Err(err).Msg("push metrics")
		}
		stopMetrics()
	}, nil
}

// metricsFlag takes --metrics-addr ADDR (or --metrics-addr=ADDR) out of a
// role's arguments into cfg.Metrics.Listen.
func metricsFlag(cfg *config.Config, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--metrics-addr" || a == "-metrics-addr":
			if i+1 >= len(args) {
				return nil, usageErr("--metrics-addr needs an address, e.g. 127.0.0.1:9464")
			}
			cfg.Metrics.Listen = args[i+1]
			i++
		case strings.HasPrefix(a, "--metrics-addr=") || strings.HasPrefix(a, "-metrics-addr="):
			cfg.Metrics.Listen = a[strings.Index(a, "=")+1:]
		default:
			out = append(out, a)
		}
	}
	return out, nil
}

// childMetricsAddr is the metrics address of the n-th child of `mesh up`
// (from 1): metrics.listen's port plus n, or port 0 (a free one) when
// metrics.listen has port 0; empty when metrics are off.
func childMetricsAddr(listen string, n int) string {
	if listen == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n))
}
