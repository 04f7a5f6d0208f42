// Package e2e holds the end-to-end tests and benchmarks of the mesh binary,
// apart from the command they test. TestMain builds cmd/mesh and
// cmd/mcp-resources once; each test starts `mesh up` (or single roles) on
// free ports and a temporary data dir, and drives it as a user would: over
// HTTP, and with real peers from testdata/peers (the official AG-UI and A2A
// clients, the a2a-go SDK, Debian's Chromium through playwright-core).
//
// The harness (harness_test.go) stops every mesh a test started when the
// test ends, and fails the test if any line of that mesh's log is not one
// JSON object with each key once (logcheck_test.go). `make chaos` runs
// TestChaos at full scale; `make bench` runs the benchmarks here too.
//
// Every test runs in parallel with the others (t.Parallel) but those that
// kill processes under load or measure memory, listed in runAlone
// (parallel_test.go), which run alone before the others start: a test
// spends most of its time waiting on processes it started, so one after
// another the tests would leave the machine mostly idle. A new test calls
// t.Parallel first unless it is of runAlone's kind;
// TestEveryTestRunsInParallel holds the package to that.
package e2e
