//go:build linux

package toolhost

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

// TestChildDiesWithHost kills a toolhost with SIGKILL, which it cannot
// handle, and checks that its MCP server goes with it.
func TestChildDiesWithHost(t *testing.T) {
	m := meshtest.New(t)
	host := exec.Command(os.Args[0])
	host.Env = append(os.Environ(), envHost+"="+m.Server.ClientURL(), "GORACE=atexit_sleep_ms=0")
	host.Stderr = os.Stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = host.Process.Kill()
		_ = host.Wait()
	})
	var pid int
	meshtest.Eventually(t, 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		res, err := bus.CallTool(ctx, m.NC, m.NS, "orphan", "pid", mesh.ToolRequest{}, nil)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(res.Text)
		return err == nil
	}, "the toolhost process serves the pid tool")
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // the test failed: don't leave it behind
		}
	})
	if !alive(pid) {
		t.Fatalf("MCP server %d is not running", pid)
	}
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	meshtest.Eventually(t, 10*time.Second, func() bool { return !alive(pid) },
		"MCP server %d ends with its toolhost", pid)
}
