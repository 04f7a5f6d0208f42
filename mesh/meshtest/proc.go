package meshtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ProcUsage is what /proc says a process has used: the benchmarks read it
// before and after a load, since CPU time, unlike latency, does not depend
// on what else the machine runs.
type ProcUsage struct {
	// CPU is its user and system time so far (utime + stime).
	CPU time.Duration
	// RSS is its resident set in bytes.
	RSS int64
	// PSS is its proportional set size in bytes: pages shared with other
	// processes (a binary several processes map) counted in shares; 0 when
	// /proc does not say.
	PSS int64
	// RSSFile is the part of RSS that maps files (the program's and its
	// libraries' code and read-only data, which every process of one
	// binary maps again), RSSAnon the process's own memory (heap, stacks);
	// both 0 when /proc does not say.
	RSSFile, RSSAnon int64
}

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// Proc reads the usage of process pid; ok is false when it is gone.
func Proc(pid int) (u ProcUsage, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u, false
	}
	// After the comm: state(0) ppid … utime(11) stime(12) … rss(21), in pages.
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return u, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	u = ProcUsage{CPU: time.Duration(ut+st) * clockTick, RSS: rss * int64(os.Getpagesize()), PSS: pss(pid)}
	u.RSSFile, u.RSSAnon = rssSplit(pid)
	return u, true
}

// rssSplit is the RssFile and RssAnon lines of /proc/<pid>/status, in bytes.
func rssSplit(pid int) (file, anon int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || key != "RssFile" && key != "RssAnon" {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if key == "RssFile" {
			file = kb << 10
		} else {
			anon = kb << 10
		}
	}
	return file, anon
}

// pss is the Pss line of /proc/<pid>/smaps_rollup, in bytes (0 when unknown).
func pss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// MustProc is [Proc] for a process that must still run: the test fails
// when it is gone.
func MustProc(t testing.TB, pid int) ProcUsage {
	t.Helper()
	u, ok := Proc(pid)
	if !ok {
		t.Fatalf("process %d: no /proc/%d/stat", pid, pid)
	}
	return u
}
