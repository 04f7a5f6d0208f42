package meshtest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrStaysOutOfTheEphemeralRange checks that FreeAddr's ports are
// free, below the range outgoing connections take their ports from, and
// never handed out twice.
func TestFreeAddrStaysOutOfTheEphemeralRange(t *testing.T) {
	lo := ephemeralPortsFrom()
	if lo <= lowestTestPort+1000 {
		t.Skipf("this kernel's ephemeral ports start at %d: FreeAddr falls back to any free port", lo)
	}
	seen := map[string]bool{}
	for range 200 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < lowestTestPort || port >= lo {
			t.Fatalf("port %d is outside [%d, %d)", port, lowestTestPort, lo)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		_ = l.Close()
	}
}
