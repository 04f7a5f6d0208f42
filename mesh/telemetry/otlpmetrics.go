package telemetry

import (
	"context"

	promexport "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// MetricsConfig configures [SetupMetrics].
type MetricsConfig struct {
	// Endpoint and Protocol are config.Telemetry's MetricsEndpoint and
	// MetricsProtocol: an empty Endpoint pushes nothing. The exporter reads
	// the endpoint, headers and timeouts from OTEL_EXPORTER_OTLP_*.
	Endpoint, Protocol string
	// Service is the default service.name, Node the service.instance.id.
	Service, Node string
}

// SetupMetrics pushes this process's metrics over OTLP as well, every
// OTEL_METRIC_EXPORT_INTERVAL (60 s by default): the same series /metrics
// serves, read from the registry, so that the two never disagree. It
// returns the function that pushes a last time and stops.
func SetupMetrics(ctx context.Context, cfg MetricsConfig) (shutdown func(context.Context) error, err error) {
	if cfg.Endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	var exp sdkmetric.Exporter
	if cfg.Protocol == "grpc" {
		exp, err = otlpmetricgrpc.New(ctx)
	} else {
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, err
	}
	res, err := processResource(ctx, cfg.Service, cfg.Node)
	if err != nil {
		return nil, err
	}
	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithProducer(promexport.NewMetricProducer(promexport.WithGatherer(registry))))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	return mp.Shutdown, nil
}
