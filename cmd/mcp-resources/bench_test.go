package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkStdioList measures one resources_list call as the toolhost
// makes it (the SDK's client over stdio, a call id in _meta, no arguments)
// on the built binary: the server's CPU per call (utime + stime from /proc,
// so the client's own work is not counted) and its resident set at the
// end, with inFlight calls at a time.
func BenchmarkStdioList(b *testing.B) {
	bin := buildBinary(b)
	for _, inFlight := range []int{1, 8} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			cmd := exec.Command(bin, "--db", filepath.Join(b.TempDir(), "r.db"), "--log-level", "warn")
			cmd.Stderr = os.Stderr
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(b.Context(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cs.Close() })
			call := func(tool, id string, args map[string]any) *mcp.CallToolResult {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: mcp.Meta{callIDMetaKey: id}, Name: tool, Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %v", tool, err, res)
				}
				return res
			}
			for i := range 3 { // a few resources to list
				call(toolAdd, fmt.Sprintf("seed-%d", i), map[string]any{"name": fmt.Sprintf("r%d", i), "value": i})
			}
			pid := cmd.Process.Pid
			before := meshtest.MustProc(b, pid).CPU
			b.ResetTimer()
			var wg sync.WaitGroup
			work := make(chan int, b.N)
			for i := range b.N {
				work <- i
			}
			close(work)
			for range inFlight {
				wg.Go(func() {
					for i := range work {
						if res := call(toolList, fmt.Sprintf("call-%d", i), map[string]any{}); !strings.Contains(textOf(res), `"count":3`) {
							b.Errorf("answer %s, want a list of 3", textOf(res))
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			cpu := meshtest.MustProc(b, pid).CPU - before
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-us/call")
			b.ReportMetric(float64(meshtest.MustProc(b, pid).RSS)/(1<<20), "server-rss-MB")
		})
	}
}
