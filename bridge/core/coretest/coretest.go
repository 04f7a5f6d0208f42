// Package coretest holds helpers for tests of the bridge's endpoints, which
// run a whole mesh in one process around a core.Core.
package coretest

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// WaitForTools waits until the agent behind c plans with the tool catalog:
// its catalog watch delivers the tools shortly after it starts, and a turn
// asked to list resources calls a tool once it has.
func WaitForTools(t testing.TB, c *core.Core) {
	t.Helper()
	meshtest.Eventually(t, 10*time.Second, func() bool {
		conv, err := c.NewConversation(t.Context(), core.Caller{})
		if err != nil {
			t.Fatal(err)
		}
		run, err := c.Send(t.Context(), conv.ID, "list all resources", core.Caller{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		out, err := run.Wait(ctx)
		if err != nil || !out.Finished {
			return false
		}
		for _, msg := range out.Conversation.Messages {
			if msg.Role == mesh.RoleTool {
				return true
			}
		}
		return false
	}, "the agent never called a tool")
}
