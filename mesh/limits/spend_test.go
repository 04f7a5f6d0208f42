package limits_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// Two agents adding to one principal's day at once lose nothing; another
// day and another principal count apart, and no key names a principal.
func TestSpendAddsUpAcrossAgents(t *testing.T) {
	m := meshtest.New(t)
	other := meshtest.Conn(t, m.Server.ClientURL())
	js2, err := jetstream.New(other)
	if err != nil {
		t.Fatal(err)
	}
	kv2, err := js2.KeyValue(t.Context(), m.NS.Bucket(mesh.BucketUsage))
	if err != nil {
		t.Fatal(err)
	}
	agents := []*limits.Spend{limits.NewSpend(m.JS, m.Usage), limits.NewSpend(js2, kv2)}
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := agents[i%2].Add(ctx, "2026-12-07", "alice", limits.Tally{Tokens: 100, Cost: 0.25}); err != nil {
				t.Errorf("add %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	got, err := agents[1].Of(ctx, "2026-12-07", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tokens != 2000 || got.Cost != 5 {
		t.Errorf("alice spent %+v, want 2000 tokens and 5", got)
	}
	for _, c := range []struct{ day, who string }{{"2026-12-08", "alice"}, {"2026-12-07", "bob"}} {
		if got, err := agents[0].Of(ctx, c.day, c.who); err != nil || got != (limits.Tally{}) {
			t.Errorf("%s on %s: %+v, %v; want nothing spent", c.who, c.day, got, err)
		}
	}
	if k := limits.SpendKey("2026-12-07", "alice"); strings.Contains(k, "alice") || !strings.HasPrefix(k, "2026-12-07.") {
		t.Errorf("key %q: want the day, then a hash of the principal", k)
	}
}
