package store_test

import (
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// mesh.events_max_age is the events stream's max age, and a provision
// with another one changes it on the stream in place.
func TestEventsMaxAgeReachesTheEventsStream(t *testing.T) {
	t.Parallel()
	s := meshtest.Server(t)
	js := jsOf(t, meshtest.Conn(t, s.ClientURL()))
	ns, err := mesh.NewNamespace("ret")
	if err != nil {
		t.Fatal(err)
	}
	for _, age := range []time.Duration{2 * time.Hour, 30 * 24 * time.Hour} {
		r, err := store.Provision(t.Context(), js, ns, store.ProvisionConfig{EventsMaxAge: age})
		if err != nil {
			t.Fatal(err)
		}
		info, err := r.Events.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.MaxAge != age {
			t.Errorf("MESH_EVENTS max age %v, want %v", info.Config.MaxAge, age)
		}
	}
}
