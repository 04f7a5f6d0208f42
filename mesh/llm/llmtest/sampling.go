package llmtest

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The sampling settings (temperature, top_p) each API takes, with the range
// it accepts and its words for a value outside it.

// samplingRange is an API's accepted range of one setting.
type samplingRange struct {
	name   string // as the API names the field
	lo, hi float64
}

// decodeSampling reads an optional number: nil when absent or null, else
// the value, or the reason it is refused ("not a number", "below", "above").
func decodeSampling(raw json.RawMessage, r samplingRange) (*float64, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ""
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case err != nil || raw[0] == '"':
		return nil, "not a number"
	case v < r.lo:
		return nil, "below"
	case v > r.hi:
		return nil, "above"
	}
	return &v, ""
}

var (
	openAITemperature    = samplingRange{"temperature", 0, 2}
	openAITopP           = samplingRange{"top_p", 0, 1}
	anthropicTemperature = samplingRange{"temperature", 0, 1}
	anthropicTopP        = samplingRange{"top_p", 0, 1}
	geminiTemperature    = samplingRange{"temperature", 0, 2}
	geminiTopP           = samplingRange{"top_p", 0, 1}
)

// openAISampling fills temperature and top_p, as Chat Completions checks
// them; reasoning models take only the default.
func openAISampling(model string, temperature, topP json.RawMessage, c *call) *apiError {
	for _, f := range []struct {
		raw json.RawMessage
		r   samplingRange
		out **float64
	}{{temperature, openAITemperature, &c.req.Temperature}, {topP, openAITopP, &c.req.TopP}} {
		v, why := decodeSampling(f.raw, f.r)
		switch why {
		case "not a number":
			return openAIBad(f.r.name, "Invalid type for '%s': expected a decimal, but got a string instead.", f.r.name)
		case "below":
			return openAIBad(f.r.name, "Invalid '%s': decimal below minimum value. Expected a value >= %g, but got %s instead.", f.r.name, f.r.lo, f.raw)
		case "above":
			return openAIBad(f.r.name, "Invalid '%s': decimal above maximum value. Expected a value <= %g, but got %s instead.", f.r.name, f.r.hi, f.raw)
		}
		if v != nil && *v != 1 && openAIReasoning.MatchString(model) {
			e := openAIBad(f.r.name, "Unsupported value: '%s' does not support %s with this model. Only the default (1) value is supported.", f.r.name, f.raw)
			e.code = "unsupported_value"
			return e
		}
		*f.out = v
	}
	return nil
}

// anthropicSampling fills temperature and top_p, as the Messages API
// checks them.
func anthropicSampling(temperature, topP json.RawMessage, c *call) *apiError {
	for _, f := range []struct {
		raw json.RawMessage
		r   samplingRange
		out **float64
	}{{temperature, anthropicTemperature, &c.req.Temperature}, {topP, anthropicTopP, &c.req.TopP}} {
		v, why := decodeSampling(f.raw, f.r)
		switch why {
		case "not a number":
			return anthropicBad("%s: Input should be a valid number", f.r.name)
		case "below":
			return anthropicBad("%s: Input should be greater than or equal to %g", f.r.name, f.r.lo)
		case "above":
			return anthropicBad("%s: Input should be less than or equal to %g", f.r.name, f.r.hi)
		}
		*f.out = v
	}
	return nil
}

// geminiSampling fills generationConfig's temperature and topP, as
// generateContent checks them.
func geminiSampling(temperature, topP json.RawMessage, c *call) *apiError {
	for _, f := range []struct {
		raw json.RawMessage
		r   samplingRange
		out **float64
	}{{temperature, geminiTemperature, &c.req.Temperature}, {topP, geminiTopP, &c.req.TopP}} {
		v, why := decodeSampling(f.raw, f.r)
		switch why {
		case "not a number":
			return geminiBad("Invalid value at 'generation_config.%s' (TYPE_FLOAT), %s", f.r.name, f.raw)
		case "below", "above":
			return geminiBad("* GenerateContentRequest.generation_config.%s: %s must be in the range [%g, %g]", f.r.name, fmt.Sprint(string(f.raw)), f.r.lo, f.r.hi)
		}
		*f.out = v
	}
	return nil
}
