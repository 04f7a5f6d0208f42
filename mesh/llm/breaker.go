package llm

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// One circuit breaker guards each provider endpoint (provider and base URL)
// in the process, shared by every Provider that calls it: after
// BreakerFailures consecutive failed attempts (connection failures,
// timeouts, 5xx, malformed or cut answers) it opens and calls fail fast with
// ErrBreakerOpen; after BreakerCooldown it lets one probe through, and a
// successful probe closes it. Rate limits (429), client errors (4xx) and
// cancellations neither trip nor heal it.

// breakerKey names an endpoint's breaker; the settings are part of it so
// that differently configured providers do not share state.
type breakerKey struct {
	provider, base string
	failures       int
	cooldown       time.Duration
}

var breakers sync.Map // breakerKey → *gobreaker.TwoStepCircuitBreaker[struct{}]

func endpointBreaker(k breakerKey) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	if b, ok := breakers.Load(k); ok {
		return b.(*gobreaker.TwoStepCircuitBreaker[struct{}])
	}
	failures := uint32(k.failures)
	b := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        fmt.Sprintf("%s %s", k.provider, k.base),
		MaxRequests: 1,
		Timeout:     k.cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errBreakerExcluded) },
	})
	actual, _ := breakers.LoadOrStore(k, b)
	return actual.(*gobreaker.TwoStepCircuitBreaker[struct{}])
}

// Outcomes reported to a breaker.
var (
	errBreakerFailure  = errors.New("endpoint failure")
	errBreakerExcluded = errors.New("not the endpoint's fault")
)

// breakerGate admits attempts to one endpoint.
type breakerGate interface {
	// allow returns done, to call with the outcome, or an error when the
	// breaker rejects the attempt.
	allow() (done func(outcome error), err error)
}

type gobreakerGate struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]
}

func (g gobreakerGate) allow() (func(error), error) {
	done, err := g.cb.Allow()
	if err != nil {
		return nil, err
	}
	return done, nil
}

// noGate admits every attempt (BreakerFailures -1).
type noGate struct{}

func (noGate) allow() (func(error), error) { return func(error) {}, nil }
