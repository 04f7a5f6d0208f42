package llm

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		wantOK bool
	}{
		{name: "none", header: http.Header{}},
		{name: "seconds", header: http.Header{"Retry-After": {"30"}}, want: 30 * time.Second, wantOK: true},
		{name: "fraction", header: http.Header{"Retry-After": {"0.25"}}, want: 250 * time.Millisecond, wantOK: true},
		{name: "zero", header: http.Header{"Retry-After": {"0"}}, want: 0, wantOK: true},
		{name: "date", header: http.Header{"Retry-After": {"Fri, 01 May 2026 12:00:45 GMT"}}, want: 45 * time.Second, wantOK: true},
		{name: "past date", header: http.Header{"Retry-After": {"Fri, 01 May 2026 11:00:00 GMT"}}, want: 0, wantOK: true},
		{name: "milliseconds first", header: http.Header{"Retry-After-Ms": {"1200"}, "Retry-After": {"2"}}, want: 1200 * time.Millisecond, wantOK: true},
		{name: "garbage", header: http.Header{"Retry-After": {"soon"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := retryAfter(tt.header, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("retryAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestBackoffFullJitter(t *testing.T) {
	b := backoff{base: 10 * time.Millisecond, max: 50 * time.Millisecond}
	for n, ceil := range []time.Duration{10, 20, 40, 50, 50, 50} {
		ceil *= time.Millisecond
		seen := map[time.Duration]bool{}
		for i := 0; i < 200; i++ {
			d := b.delay(n)
			if d < 0 || d > ceil {
				t.Fatalf("delay(%d) = %v, want within [0, %v]", n, d, ceil)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("delay(%d) took %d distinct values in 200 draws; want jitter", n, len(seen))
		}
	}
}
