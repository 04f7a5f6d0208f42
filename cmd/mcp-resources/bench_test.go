package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStdioList measures one resources_list call, as the toolhost
// makes it (a call id in _meta, no arguments), on the built binary over
// stdio: the server's CPU per call (utime + stime from /proc, so the
// client's own work is not counted) and its resident set at the end, with inFlight calls sent at a time.
func BenchmarkStdioList(b *testing.B) {
	bin := buildBinary(b)
	for _, inFlight := range []int{1, 8} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			srv := startRaw(b, bin, filepath.Join(b.TempDir(), "r.db"))
			for i := range 3 { // a few resources to list
				srv.call(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":"seed-%d","method":"tools/call","params":{"_meta":{"agentmesh/call_id":"seed-%d"},"name":"resources_add","arguments":{"name":"r%d","value":%d}}}`, i, i, i, i))
			}
			before := procCPU(b, srv.cmd.Process.Pid)
			b.ResetTimer()
			sent, got := 0, 0
			for got < b.N {
				for sent < b.N && sent-got < inFlight {
					srv.send(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"agentmesh/call_id":"call-%d"},"name":"resources_list","arguments":{}}}`, sent, sent))
					sent++
				}
				if line := srv.read(b); !strings.Contains(line, `"count":3`) {
					b.Fatalf("answer %s, want a list of 3", line)
				}
				got++
			}
			b.StopTimer()
			cpu := procCPU(b, srv.cmd.Process.Pid) - before
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-us/call")
			b.ReportMetric(float64(procRSS(b, srv.cmd.Process.Pid))/(1<<20), "server-rss-MB")
		})
	}
}

// rawServer is the binary spoken to line by line.
type rawServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startRaw starts bin on db and makes the initialize handshake.
func startRaw(b *testing.B, bin, db string) *rawServer {
	b.Helper()
	cmd := exec.Command(bin, "--db", db, "--log-level", "warn")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	s := &rawServer{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}
	s.call(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	s.send(b, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	return s
}

func (s *rawServer) send(b *testing.B, line string) {
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		b.Fatal(err)
	}
}

func (s *rawServer) read(b *testing.B) string {
	line, err := s.out.ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return line
}

// call sends a request and reads its answer, which must not be an error.
func (s *rawServer) call(b *testing.B, line string) string {
	s.send(b, line)
	got := s.read(b)
	var m struct{ Error json.RawMessage }
	if err := json.Unmarshal([]byte(got), &m); err != nil || m.Error != nil {
		b.Fatalf("answer to %s: %s", line, got)
	}
	return got
}

// procRSS is a process's resident set, in bytes.
func procRSS(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// procCPU is a process's CPU time so far.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
