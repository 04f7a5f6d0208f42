package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/natsconn"
)

// trustVariant is one way of running the mesh for BenchmarkTrust.
type trustVariant struct {
	name string
	// env starts `mesh up`.
	env []string
	// headers go on every HTTP request of the benchmark.
	headers []string
	// auth, when set, is agent.yaml's auth section (HTTP authentication);
	// its token goes in headers.
	auth func(b *testing.B) (yaml string, headers []string)
}

// trustVariants are compared in one run: everything off, NATS
// credentials on, then NATS credentials and HTTP authentication on, with a
// static token and with a JWT (RS256, the key from a JWKS file: what an
// identity provider issues). The event path's SSE client opens its stream
// as a browser does, with a stream token in the query.
var trustVariants = []trustVariant{
	{name: "nats-creds=off", env: []string{"MESH_NATS_AUTH=none"}},
	{name: "nats-creds=on"},
	{name: "nats-creds=on+http=token", auth: func(*testing.B) (string, []string) {
		return "auth:\n  tokens:\n    - {name: bench, token: " + adminToken + ", roles: [admin]}\n" + noLimits, []string{"Authorization", "Bearer " + adminToken}
	}},
	{name: "nats-creds=on+http=jwt", auth: func(b *testing.B) (string, []string) {
		keys := newJWTKeys(b)
		file := filepath.Join(b.TempDir(), "jwks.json")
		if err := os.WriteFile(file, keys.jwks(), 0o600); err != nil {
			b.Fatal(err)
		}
		tok := keys.token(b, "RS256", "bench", []string{"user"}, 24*time.Hour, jwtAudience)
		return "auth:\n  jwt:\n    jwks_file: " + file + "\n    issuer: " + jwtIssuer + "\n    audience: " + jwtAudience + "\n" + noLimits, []string{"Authorization", "Bearer " + tok}
	}},
}

// noLimits turns off the limits that auth turns on: one principal's turns
// at full speed are what the benchmark measures (BenchmarkLimits in
// bridge/ measures the limits).
const noLimits = "limits:\n  enabled: false\n"

// BenchmarkTrust is the cost of trust, measured in one run: the REST turn
// of BenchmarkRESTTurn (one read-only tool call) and the event path of
// BenchmarkEventLatency (an event published as an agent publishes it, to an
// SSE client of the bridge), with each variant of trustVariants. Every
// variant's mesh runs from the start, and the variants take turns, three
// rounds, so that a machine whose load drifts weighs on all alike; it
// prints each variant's median p50 against the first one's.
func BenchmarkTrust(b *testing.B) {
	meshes := make([]*meshProc, len(trustVariants))
	variants := slices.Clone(trustVariants)
	for i := range variants {
		v := &variants[i]
		cfg := ""
		if v.auth != nil {
			var yaml string
			yaml, v.headers = v.auth(b)
			cfg = defaultConfig(b) + "\n" + yaml
		}
		meshes[i] = startMesh(b, meshOpts{logLevel: "warn", env: v.env, config: cfg})
	}
	// By variant and measure, by round: the last run of a round (the one
	// with the final b.N) overwrites the first (b.N = 1).
	p50 := map[string]map[int]float64{}
	for round := 1; round <= 3; round++ {
		for _, what := range []string{"turn", "event"} {
			for i, v := range variants {
				m := meshes[i]
				b.Run(fmt.Sprintf("%s/%s/round=%d", v.name, what, round), func(b *testing.B) {
					var got float64
					if what == "turn" {
						got = benchTrustTurn(b, m, v)
					} else {
						got = p50ms(benchTrustEvent(b, m, v))
					}
					if p50[v.name+" "+what] == nil {
						p50[v.name+" "+what] = map[int]float64{}
					}
					p50[v.name+" "+what][round] = got
				})
			}
		}
	}
	base := variants[0].name
	for _, what := range []string{"turn", "event"} {
		ref := median(p50[base+" "+what])
		var line []string
		for _, v := range variants {
			got := median(p50[v.name+" "+what])
			if ref == 0 {
				continue
			}
			line = append(line, v.name+" "+formatMs(got)+" ("+formatPct(got/ref-1)+")")
		}
		// Printed, not logged: make bench runs without -v.
		fmt.Printf("BenchmarkTrust %s p50 (median of the rounds): %s\n", what, strings.Join(line, ", "))
	}
}

// median of the rounds' p50s.
func median(byRound map[int]float64) float64 {
	if len(byRound) == 0 {
		return 0
	}
	s := slices.Sorted(maps.Values(byRound))
	return s[len(s)/2]
}

// newConversationAs creates a conversation with the variant's headers.
func (m *meshProc) newConversationAs(headers []string) string {
	m.t.Helper()
	return str(m.do(http.StatusCreated, "POST", "/conversations", nil, headers...), "conversation", "id")
}

func benchTrustTurn(b *testing.B, m *meshProc, v trustVariant) float64 {
	conv := m.newConversationAs(v.headers)
	m.send(conv, "list all resources", v.headers...) // warm up
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%10 == 0 {
			conv = m.newConversationAs(v.headers)
		}
		t0 := time.Now()
		status, body := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"}, v.headers...)
		if status != http.StatusOK {
			b.Fatalf("status %d: %v", status, body)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatencies(b, lat)
	return p50ms(lat)
}

// benchTrustEvent publishes as the agent role does: through natsconn.Connect,
// with the agent's identity when the mesh has identities; it returns the
// latencies from publish to SSE client.
func benchTrustEvent(b *testing.B, m *meshProc, v trustVariant) []time.Duration {
	cfg := natsconn.Config{URL: "nats://" + m.natsAddr, Name: "bench-agent", Inbox: mesh.DefaultNamespace().Inbox(mesh.RoleAgent)}
	if !strings.Contains(strings.Join(v.env, " "), "MESH_NATS_AUTH=none") {
		cfg.NKeyFile = filepath.Join(m.dataDir, "creds", "agent.nk")
	}
	nc, err := natsconn.Connect(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	pub := bus.NewPublisher(js, mesh.DefaultNamespace())
	conv := m.newConversationAs(v.headers)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	path := "/conversations/" + conv + "/events"
	if len(v.headers) > 0 {
		// As a browser's EventSource: a stream token in the query.
		tok := m.do(http.StatusOK, "POST", "/auth/stream-token", nil, v.headers...)
		path += "?access_token=" + str(tok, "token")
	}
	r := openSSEBench(b, ctx, m.url(path))
	defer r.close()
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		if _, err := pub.Publish(ctx, conv, "bench", "", stamp()); err != nil {
			b.Fatal(err)
		}
		ev, err := r.next()
		if err != nil {
			b.Fatal(err)
		}
		if t, ok := sentAt([]byte(ev.data)); ok {
			lat = append(lat, time.Since(t))
		}
	}
	b.StopTimer()
	reportLatencies(b, lat)
	return lat
}

func p50ms(lat []time.Duration) float64 {
	if len(lat) == 0 {
		return 0
	}
	sorted := append([]time.Duration{}, lat...)
	slicesSort(sorted)
	return float64(sorted[len(sorted)/2].Microseconds()) / 1000
}

func formatMs(ms float64) string { return strconv.FormatFloat(ms, 'f', 2, 64) + " ms" }

func formatPct(f float64) string {
	s := strconv.FormatFloat(100*f, 'f', 1, 64) + " %"
	if f >= 0 {
		s = "+" + s
	}
	return s
}
