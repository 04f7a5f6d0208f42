package modelspec

import (
	"fmt"
	"math"
)

// Price is what a model's tokens cost, per million tokens, in whatever
// currency the configuration uses throughout.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
	// Cached is the price of prompt tokens read from the provider's
	// prompt cache. Zero means the input price.
	Cached float64 `yaml:"cached"`
	// CacheWrite is the price of prompt tokens written to the cache
	// (Anthropic bills them apart). Zero means the input price.
	CacheWrite float64 `yaml:"cache_write"`
}

// Cost is what input tokens (cached and cacheWrite of them served by or
// stored in the prompt cache) and output tokens cost at p.
func (p Price) Cost(input, output, cached, cacheWrite int) float64 {
	cachedPrice, writePrice := p.Cached, p.CacheWrite
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	if writePrice == 0 {
		writePrice = p.Input
	}
	plain := max(0, input-cached-cacheWrite)
	return (float64(plain)*p.Input + float64(cached)*cachedPrice + float64(cacheWrite)*writePrice + float64(output)*p.Output) / 1e6
}

// Check says what is wrong with p, if anything.
func (p Price) Check() error {
	for name, v := range map[string]float64{"input": p.Input, "output": p.Output, "cached": p.Cached, "cache_write": p.CacheWrite} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: %v: a price per million tokens is 0 or more", name, v)
		}
	}
	return nil
}

// Prices are the prices of models by their canonical name
// ([Model.String]: "openai:gpt-4o").
type Prices map[string]Price

// Of is the price of model (canonical name); ok is false without one.
func (ps Prices) Of(model string) (p Price, ok bool) {
	p, ok = ps[model]
	return p, ok
}
