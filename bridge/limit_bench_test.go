package bridge

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLimits is the cost of the limits per request: GET /auth/me (no NATS of its own) as
// one principal from one address, with the limits off and on (budgets
// large enough never to refuse: each request spends its principal's and
// its address's, two compare-and-set writes to the embedded server).
// cpu-µs/req is the CPU of the whole process, the server's included.
func BenchmarkLimits(b *testing.B) {
	for _, on := range []bool{false, true} {
		name, yaml := "off", strings.Replace(limitsYAML, "limits:\n", "limits:\n  enabled: false\n", 1)
		if on {
			name = "on"
			yaml = strings.Replace(strings.Replace(limitsYAML, "requests_per_minute: 3", "requests_per_minute: 100000000", 1),
				"ip_requests_per_minute: 5", "ip_requests_per_minute: 100000000", 1)
		}
		b.Run(name, func(b *testing.B) {
			br, _ := limitedBridges(b, yaml)
			before := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				if w := call(br, "GET", "/auth/me", "alice-token-0123456789", "192.0.2.1:1000", ""); w.Code != 200 {
					b.Fatalf("status %d %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/req")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
