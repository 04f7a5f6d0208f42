package llm

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// backoff is exponential backoff with full jitter: before retry n (from 0)
// wait a random time in [0, min(max, base·2ⁿ)].
type backoff struct {
	base, max time.Duration
}

func (b backoff) delay(n int) time.Duration {
	ceil := b.base
	for i := 0; i < n && ceil < b.max; i++ {
		ceil *= 2
	}
	if ceil > b.max {
		ceil = b.max
	}
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// retryAfter reads how long a provider asks to wait: retry-after-ms
// (OpenAI, Anthropic), then Retry-After in seconds or as an HTTP date
// (header names are case-insensitive, so Anthropic's retry-after is the
// same header). ok is false when the answer says nothing.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0, true
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// googleRetryDelay reads the retryDelay of a google.rpc.RetryInfo detail in
// a Gemini error body ({"error":{"details":[{"@type":…RetryInfo,
// "retryDelay":"37s"}]}}).
func googleRetryDelay(body []byte) (time.Duration, bool) {
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0, false
	}
	for _, d := range e.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "" {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v >= 0 {
				return v, true
			}
		}
	}
	return 0, false
}

// retryableStatus tells whether an HTTP status is worth another attempt:
// rate limits, timeouts and the transient server errors (529 is
// Anthropic's "overloaded").
func retryableStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, 529:
		return true
	}
	return false
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
