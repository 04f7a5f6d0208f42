package llmtest

import (
	"encoding/json"
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

// fillSampling decodes temperature and top_p into c's request, each in
// its API's range; refuse words a value the API refuses (why is "not a
// number", "below" or "above"; empty for a value in range, which an API
// may still refuse), or returns nil to take it.
func fillSampling(c *call, temperature, topP json.RawMessage, ranges [2]samplingRange, refuse func(r samplingRange, why string, raw json.RawMessage, v *float64) *apiError) *apiError {
	for i, f := range []struct {
		raw json.RawMessage
		out **float64
	}{{temperature, &c.req.Temperature}, {topP, &c.req.TopP}} {
		v, why := decodeSampling(f.raw, ranges[i])
		if e := refuse(ranges[i], why, f.raw, v); e != nil {
			return e
		}
		*f.out = v
	}
	return nil
}

// openAISampling fills temperature and top_p, as Chat Completions checks
// them; reasoning models take only the default.
func openAISampling(model string, temperature, topP json.RawMessage, c *call) *apiError {
	return fillSampling(c, temperature, topP, [2]samplingRange{openAITemperature, openAITopP}, func(r samplingRange, why string, raw json.RawMessage, v *float64) *apiError {
		switch why {
		case "not a number":
			return openAIBad(r.name, "Invalid type for '%s': expected a decimal, but got a string instead.", r.name)
		case "below":
			return openAIBad(r.name, "Invalid '%s': decimal below minimum value. Expected a value >= %g, but got %s instead.", r.name, r.lo, raw)
		case "above":
			return openAIBad(r.name, "Invalid '%s': decimal above maximum value. Expected a value <= %g, but got %s instead.", r.name, r.hi, raw)
		}
		if v != nil && *v != 1 && openAIReasoning.MatchString(model) {
			e := openAIBad(r.name, "Unsupported value: '%s' does not support %s with this model. Only the default (1) value is supported.", r.name, raw)
			e.code = "unsupported_value"
			return e
		}
		return nil
	})
}

// anthropicSampling fills temperature and top_p, as the Messages API
// checks them.
func anthropicSampling(temperature, topP json.RawMessage, c *call) *apiError {
	return fillSampling(c, temperature, topP, [2]samplingRange{anthropicTemperature, anthropicTopP}, func(r samplingRange, why string, _ json.RawMessage, _ *float64) *apiError {
		switch why {
		case "not a number":
			return anthropicBad("%s: Input should be a valid number", r.name)
		case "below":
			return anthropicBad("%s: Input should be greater than or equal to %g", r.name, r.lo)
		case "above":
			return anthropicBad("%s: Input should be less than or equal to %g", r.name, r.hi)
		}
		return nil
	})
}

// geminiSampling fills generationConfig's temperature and topP, as
// generateContent checks them.
func geminiSampling(temperature, topP json.RawMessage, c *call) *apiError {
	return fillSampling(c, temperature, topP, [2]samplingRange{geminiTemperature, geminiTopP}, func(r samplingRange, why string, raw json.RawMessage, _ *float64) *apiError {
		switch why {
		case "not a number":
			return geminiBad("Invalid value at 'generation_config.%s' (TYPE_FLOAT), %s", r.name, raw)
		case "below", "above":
			return geminiBad("* GenerateContentRequest.generation_config.%s: %s must be in the range [%g, %g]", r.name, raw, r.lo, r.hi)
		}
		return nil
	})
}
