package mesh_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/mesh"
)

func ExampleNamespace() {
	ns := mesh.DefaultNamespace()
	work, _ := ns.Work(mesh.RoleAgent, "resource-manager", "6f1c1a8e-8d1e-4c2f-9a3b-2d7e5b4c3a10")
	decide, _ := ns.ApprovalDecide("6f1c1a8e-8d1e-4c2f-9a3b-2d7e5b4c3a10")
	fmt.Println(ns.Stream(mesh.StreamEvents), ns.Bucket(mesh.BucketSessions))
	fmt.Println(work)
	fmt.Println(decide)
	fmt.Println(ns.EventsAll())
	// Output:
	// MESH_EVENTS mesh_sessions
	// mesh.work.agent.resource-manager.6f1c1a8e-8d1e-4c2f-9a3b-2d7e5b4c3a10
	// mesh.approval.6f1c1a8e-8d1e-4c2f-9a3b-2d7e5b4c3a10.decide
	// mesh.evt.>
}

func ExampleParseDecision() {
	for _, body := range []string{`{"approved": true}`, `{"action": "reject"}`, `{"answer": "yes"}`} {
		d, _ := mesh.ParseDecision([]byte(body))
		fmt.Println(d.Approved)
	}
	// Output:
	// true
	// false
	// true
}
