package core

import "testing"

func TestHealthStatus(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		failed               int
		degradation          bool
		open, busy, capacity int
		want                 string
	}{
		{name: "nothing wrong", want: Healthy},
		{name: "80 % of the capacity", busy: 80, capacity: 100, want: Healthy},
		{name: "past 80 % of the capacity", busy: 81, capacity: 100, want: Degraded},
		{name: "no capacity set", busy: 5000, want: Healthy},
		{name: "one node down", failed: 1, want: Degraded},
		{name: "three nodes down", failed: 3, want: Degraded},
		{name: "a breaker open", open: 1, want: Degraded},
		{name: "four nodes down", failed: 4, want: Unhealthy},
		{name: "degradation mode", degradation: true, want: Unhealthy},
		{name: "degradation mode beats capacity", degradation: true, busy: 90, capacity: 100, want: Unhealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := healthStatus(tc.failed, tc.degradation, tc.open, tc.busy, tc.capacity); got != tc.want {
				t.Errorf("status %q, want %q", got, tc.want)
			}
		})
	}
	for status, want := range map[string]float64{Healthy: 0, Degraded: 1, Unhealthy: 2} {
		if got := HealthCode(status); got != want {
			t.Errorf("HealthCode(%q) = %v, want %v", status, got, want)
		}
	}
}
