package meshtest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address whose port is free and stays free
// until a process of the test binds it.
//
// Its ports lie below the kernel's ephemeral range (ip_local_port_range),
// from which the local end of every outgoing connection and every ":0"
// listener takes its port. A port picked from that range and bound only
// later, by a process yet to start or a NATS node restarted on its own
// ports, was now and then taken meanwhile by a connection's local end (a
// route between the other nodes, say): the node then died with "address
// already in use". Below the range only an explicit bind can take it, and
// this process hands each port out once.
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo := ephemeralPortsFrom()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if lo > lowestTestPort+1000 {
		for range 1000 {
			port := lowestTestPort + rand.IntN(lo-lowestTestPort)
			if ports.given[port] {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue // some service's
			}
			_ = l.Close()
			ports.given[port] = true
			return l.Addr().String()
		}
	}
	// A kernel whose ephemeral range leaves no room below it: any free port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lowestTestPort is the lowest port FreeAddr hands out.
const lowestTestPort = 10000

var ports = struct {
	mu    sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// ephemeralPortsFrom is the first port of the kernel's ephemeral range
// (32768 unless the host changed it), read once.
var ephemeralPortsFrom = sync.OnceValue(func() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
})
