package llm

import (
	"context"
	"strings"
	"testing"
	"time"
)

// What the tests of package llm_test reach inside the package. Those tests
// drive the providers through mesh/llm/llmtest's servers; llmtest imports
// llm, so only a test outside the package can import it.

// DefaultMaxTokens is the max_tokens a provider sends when none is set.
const DefaultMaxTokens = defaultMaxTokens

// GeminiSkipSignature is the placeholder thoughtSignature sent for a call
// this process did not see.
const GeminiSkipSignature = geminiSkipSignature

// NormalizeHistory is normalizeHistory, which every provider applies to
// the history it sends.
var NormalizeHistory = normalizeHistory

// SetSleep replaces how p waits between attempts, so that a test sees the
// waits without waiting.
func SetSleep(t *testing.T, p Provider, sleep func(ctx context.Context, d time.Duration) error) {
	t.Helper()
	endpointOf(t, p).sleep = sleep
}

// ForgetBreakers drops the circuit breakers of endpoints under base: a new
// test server may get the port of an earlier one, whose breaker the
// process still holds.
func ForgetBreakers(base string) {
	breakers.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(breakerKey).base, base) {
			breakers.Delete(k)
		}
		return true
	})
	limiters.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(limiterKey).base, base) {
			limiters.Delete(k)
		}
		return true
	})
}
