package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// superviseShells runs /bin/sh children with the given scripts under a
// supervisor writing their output to out, for d.
func superviseShells(t *testing.T, out *os.File, d time.Duration, scripts map[string]string) {
	t.Helper()
	var procs []process
	for name, script := range scripts {
		procs = append(procs, process{Name: name, Args: []string{"-c", script}})
	}
	sup, err := newSupervisor(supervisorConfig{
		Binary: "/bin/sh", Processes: procs, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		StopTimeout: 5 * time.Second, Stdout: out, Stderr: out, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(d, cancel) // a cancel, as at a signal
	if err := sup.run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestChildKilledMidLineLeavesTheLogFileWhole checks that a child
// SIGKILLed in the middle of a line cannot join its half line to the next
// line of the log file (`mesh up > mesh.log`): the half line ends with a
// newline, and every other line arrives whole.
func TestChildKilledMidLineLeavesTheLogFileWhole(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/mesh.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const half, whole = `{"level":"info","mess`, `{"level":"info","message":"whole"}`
	superviseShells(t, f, 1500*time.Millisecond, map[string]string{
		// The half line is written, then the child dies before its end;
		// the supervisor restarts it, so this happens again and again.
		"torn":    fmt.Sprintf(`printf '%%s' '%s'; kill -9 $$`, half),
		"talking": fmt.Sprintf(`while :; do echo '%s'; sleep 0.01; done`, whole),
	})
	data, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line != half && line != whole {
			t.Fatalf("line %d of the log is %q: lines ran together", i+1, line)
		}
		counts[line]++
	}
	if counts[half] < 3 || counts[whole] < 3 {
		t.Fatalf("the log has %d half lines and %d whole ones; want several of each:\n%s", counts[half], counts[whole], data)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("the log does not end with a newline: %q", data[max(0, len(data)-80):])
	}
}

// TestChildWritesStraightIntoAPipe checks that a child whose supervisor's
// output is a pipe (journald, a container runtime) writes into that very
// pipe, with no copy in between, and that a regular file gets a pipe of the
// supervisor's instead.
func TestChildWritesStraightIntoAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r)
		got <- buf.String()
	}()
	// readlink names what the child's stderr is; sleep keeps the child
	// from a restart before the supervisor stops it.
	superviseShells(t, w, 500*time.Millisecond, map[string]string{
		"role": `readlink /proc/$$/fd/2 >&2; exec sleep 10`,
	})
	w.Close()
	if out, want := <-got, fmt.Sprintf("pipe:[%d]\n", st.Ino); out != want {
		t.Errorf("the child's stderr is %q, want the supervisor's pipe %q", out, want)
	}

	f, err := os.Create(t.TempDir() + "/mesh.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	superviseShells(t, f, 500*time.Millisecond, map[string]string{
		"role": `readlink /proc/$$/fd/2 >&2; exec sleep 10`,
	})
	data, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "pipe:[") || strings.Count(string(data), "\n") != 1 {
		t.Errorf("with a log file, the child's stderr is %q, want a pipe", data)
	}
}
