package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// TestChaos runs `mesh up` with two agents and two toolhosts, drives
// concurrent conversations that mix tool turns and destructive requests
// (approved as they appear), and group chats of two members, and meanwhile
// kills a random role process (the group's too) with SIGKILL every 2-3 s.
// One conversation in twenty (the first, at the small size) also sends a
// message (a destructive request, but for group chats) while every process
// that would take it up is stopped, and kills the bridge while the turn
// waits in the queue: its retry must find the queued turn, and its next
// message must wait for it.
// Afterwards every conversation has completed or waits for an approval
// still listed, no message is missing or doubled, every round of a group
// chat ended, every approved destructive call ran exactly once and nothing
// ran without approval. `make test` runs it small; `make chaos` sets
// MESH_CHAOS_SECONDS=60 and MESH_CHAOS_CONVERSATIONS=50 (a third of them
// group chats).
func TestChaos(t *testing.T) {
	seconds, conversations := envInt("MESH_CHAOS_SECONDS", 15), envInt("MESH_CHAOS_CONVERSATIONS", 6)
	// Killing a process every 2-3 s puts the mesh in degradation mode (more
	// than 3 failures in 30 s); it must leave it soon after the killing stops.
	config := defaultConfig(t) + "\nmesh:\n  tool_wait: 10s\nhttp:\n  wait_timeout: 60s\nmonitor:\n  recover_after: 3s\n" + chaosGroup
	m := startMesh(t, meshOpts{config: config, args: []string{"--replicas", "agent=2,toolhost=2"}, logLevel: "info"})

	var st chaosStats
	stop := make(chan struct{})
	killerDone := make(chan struct{})
	m.mu.Lock()
	upPID := m.cmd.Process.Pid
	m.mu.Unlock()
	st.cause = map[string]int{}
	go func() {
		defer close(killerDone)
		roles := []string{"agent", "toolhost", "approver", "bridge", "group"}
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(2000+rand.IntN(1000)) * time.Millisecond):
			}
			if st.queueing.Load() > 0 {
				continue // a driver kills the bridge itself, with a turn queued
			}
			var victims []int
			var victimRoles []string
			for _, p := range descendants(upPID) {
				if args := cmdline(p); len(args) >= 2 && strings.HasSuffix(args[0], "/mesh") && contains(roles, args[1]) {
					victims, victimRoles = append(victims, p), append(victimRoles, args[1])
				}
			}
			if len(victims) > 0 {
				i := rand.IntN(len(victims))
				if killPID(victims[i]) == nil {
					st.killed(victimRoles[i])
				}
			}
		}
	}()

	start := time.Now()
	deadline := start.Add(time.Duration(seconds) * time.Second)
	// The drivers that kill the bridge with a turn queued do it one after
	// another, spread over the first half of the run (the supervisor's
	// backoff grows when a role dies again within 10 s), so that one whose
	// turn was taken up first has time to try again.
	queuers := (conversations + 19) / 20
	drivers := make([]*chaosDriver, conversations)
	var wg sync.WaitGroup
	for i := range drivers {
		d := &chaosDriver{m: m, t: t, id: i, st: &st, upPID: upPID, queueKill: i%20 == 0,
			queueAt: start.Add(time.Duration(seconds) * time.Second * time.Duration(i/20+1) / time.Duration(2*queuers+2))}
		if i%3 == 2 {
			d.group = "duo"
		}
		drivers[i] = d
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.run(deadline)
		}()
	}
	wg.Wait()
	close(stop)
	<-killerDone
	m.waitReady()

	for _, d := range drivers {
		d.check()
	}
	// A driver whose every try found its turn taken up first (on a loaded
	// machine the monitor restarts the stopped agents before the record
	// shows) did not drive the case; one of them at least must have.
	if st.queueKills.Load() == 0 {
		t.Error("the bridge was never killed while a turn waited in the queue")
	}
	for _, d := range drivers {
		for name, approved := range d.destructive {
			n := m.resourceRows(name)
			switch {
			case approved && n != 1:
				t.Errorf("%s: approved, but %d rows (want exactly 1)", name, n)
			case !approved && n != 0:
				t.Errorf("%s: never approved, but %d rows", name, n)
			}
		}
	}
	summary := fmt.Sprintf("chaos: %d s, %d conversations (%d group chats), %d kills (%s), %d turns, %d approvals decided, %d retried requests (%s), %d bridge kills with a turn queued",
		seconds, conversations, conversations/3, st.kills.Load(), st.byRole(), st.turns.Load(), st.approved.Load(), st.retries.Load(), st.byCause(), st.queueKills.Load())
	t.Log(summary)
	fmt.Println(summary)
}

// chaosGroup is the chaos test's group chat: two members that list the
// resources in turn.
const chaosGroup = `groups:
  - name: duo
    max_turns: 2
    participants:
      - {agent: lister, prompt: "You list resources."}
      - {agent: checker, prompt: "You check resources."}
`

type chaosStats struct {
	kills, turns, approved, retries, queueKills atomic.Int64
	// failed counts the requests a strict driver saw fail (5xx, no answer).
	failed atomic.Int64
	// queueing counts the drivers that are killing the bridge with a turn
	// queued: the killer waits meanwhile, lest it restart what they stopped
	// or kill the bridge first. queueMu makes them take turns, for the
	// same reason.
	queueing atomic.Int32
	queueMu  sync.Mutex

	mu    sync.Mutex
	roles map[string]int // kills by role
	cause map[string]int // retried requests by what they got
}

// retried counts a retried request by what it got: no answer (the bridge
// down), or its status and code.
func (s *chaosStats) retried(status int, code string) {
	s.retries.Add(1)
	cause := "no answer"
	if status != 0 {
		cause = strconv.Itoa(status) + " " + code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cause[cause]++
}

// byCause lists the retried requests by cause: "no answer 80, 409 turn_in_progress 3".
func (s *chaosStats) byCause() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(s.cause)) {
		parts = append(parts, fmt.Sprintf("%s %d", strings.TrimSpace(c), s.cause[c]))
	}
	return strings.Join(parts, ", ")
}

func (s *chaosStats) killed(role string) {
	s.kills.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.roles == nil {
		s.roles = map[string]int{}
	}
	s.roles[role]++
}

// byRole lists the kills by role: "agent 3, group 1".
func (s *chaosStats) byRole() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(s.roles)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, s.roles[r]))
	}
	return strings.Join(parts, ", ")
}

// chaosDriver is one conversation of the chaos test, driven like a careful
// client: every message with an Idempotency-Key, every request retried until
// it is answered.
type chaosDriver struct {
	m  *meshProc
	t  *testing.T
	id int
	st *chaosStats

	group       string // a group chat's group
	conv        string
	sent        []string        // user messages, in order
	destructive map[string]bool // resource name → approved

	// queueKill: from queueAt on, send a destructive request while the
	// agents are stopped and kill the bridge while it waits in the queue,
	// until queueKilled; queueTries counts the tries.
	queueKill, queueKilled bool
	queueTries             int
	queueAt                time.Time
	upPID                  int

	// onTurn, when set, learns when each message was sent, or approval
	// decided, and when its turn had settled (the cluster tests measure
	// pauses with it).
	onTurn func(start, end time.Time)
	// strict counts every answer of 5xx, and no answer, as a failure (the
	// cluster tests: no role is killed there, and a NATS node's loss
	// should cost a request time, never an error). It is still retried,
	// so that the run goes on and counts the others.
	strict bool
}

func (d *chaosDriver) run(deadline time.Time) {
	d.destructive = map[string]bool{}
	var create map[string]any
	if d.group != "" {
		create = map[string]any{"group": d.group}
	}
	d.conv = str(d.retry("POST", "/conversations", create), "conversation", "id")
	// A driver that is to kill the bridge with a turn queued goes on past
	// the deadline until it has (a few tries at most): on a loaded machine
	// its turns may be too slow to come to one in time.
	for n := 0; time.Now().Before(deadline) || d.queueKill && !d.queueKilled && d.queueTries < 5; n++ {
		text := "list all resources"
		name := ""
		// Group chats only list: each member would ask for its own approval.
		if n%2 == 1 && d.group == "" {
			name = fmt.Sprintf("chaos-%d-%d", d.id, n)
			text = fmt.Sprintf("add resource %s with value %d", name, n)
			d.destructive[name] = false
		}
		d.sent = append(d.sent, text)
		if d.queueKill && !d.queueKilled && time.Now().After(d.queueAt) && (name != "" || d.group != "") {
			d.queueTries++
			d.queueKilled = d.killWhileQueued(text, strconv.Itoa(n))
		}
		sentAt := time.Now()
		d.retry("POST", "/conversations/"+d.conv+"/messages", map[string]any{"message": text}, "Idempotency-Key", strconv.Itoa(n))
		d.st.turns.Add(1)
		d.settle()
		if d.onTurn != nil {
			d.onTurn(sentAt, time.Now())
		}
		// The answer may have been lost with a killed bridge: the
		// conversation says whether the turn waits for an approval.
		c := obj(d.retry("GET", "/conversations/"+d.conv, nil), "conversation")
		if str(c, "status") != "waiting_approval" {
			continue
		}
		ap := obj(c, "pending_approval")
		if name == "" || obj(ap, "tool_args")["name"] != name {
			d.t.Errorf("%s waits for approval %v, which is not for %q", d.conv, ap, name)
			return
		}
		decidedAt := time.Now()
		body := d.retry("POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
		if str(body, "approval", "status") == "approved" {
			d.destructive[name] = true
			d.st.approved.Add(1)
		}
		d.settle()
		if d.onTurn != nil {
			d.onTurn(decidedAt, time.Now())
		}
	}
}

// retry makes a request until the mesh answers it: 2xx, or 409 for a
// decision already taken (the first answer was lost).
func (d *chaosDriver) retry(method, path string, body any, headers ...string) map[string]any {
	for attempt := 0; ; attempt++ {
		status, out := d.m.try(method, path, body, headers...)
		switch {
		case status == http.StatusOK || status == http.StatusCreated:
			return out
		case status == http.StatusAccepted:
			d.settle()
			return out
		case status == http.StatusConflict && str(out, "code") == "approval_decided":
			return out
		case status == http.StatusConflict && str(out, "code") == "turn_in_progress":
		case status != 0 && status < 500 && status != http.StatusConflict:
			d.t.Errorf("%s %s: %d %v", method, path, status, out)
			return out
		}
		d.st.retried(status, str(out, "code"))
		if d.strict && (status == 0 || status >= 500) {
			d.st.failed.Add(1)
			d.t.Logf("%s %s: %d %v", method, path, status, out)
		}
		if attempt > 300 {
			d.t.Errorf("%s %s: no answer after %d attempts (last %d %v)", method, path, attempt, status, out)
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// settle waits until the conversation runs no turn and has none queued.
func (d *chaosDriver) settle() {
	meshtest.Eventually(d.t, 3*time.Minute, func() bool {
		_, idle := d.idle()
		return idle
	}, "conversation %s keeps running", d.conv)
}

// idle reads the conversation and says whether it runs no turn and has
// none queued.
func (d *chaosDriver) idle() (conv map[string]any, idle bool) {
	status, out := d.m.try("GET", "/conversations/"+d.conv, nil)
	c := obj(out, "conversation")
	return c, status == http.StatusOK && c["turn"] == nil && c["queued_turn"] == nil
}

// killWhileQueued sends text (with its idempotency key) while every
// process that would take it up is stopped (SIGSTOP: the agents, or the
// group role for a group chat), waits until the conversation shows it
// queued, kills the bridge, and lets them go on (SIGCONT). The caller then
// sends it again, as a client whose answer was lost does. It reports
// whether the bridge was killed with the turn queued: not when a process
// (one restarted meanwhile) took the turn up first.
func (d *chaosDriver) killWhileQueued(text, key string) bool {
	role := "agent"
	if d.group != "" {
		role = "group"
	}
	d.st.queueMu.Lock()
	defer d.st.queueMu.Unlock()
	d.st.queueing.Add(1)
	defer d.st.queueing.Add(-1)
	// A process the supervisor starts meanwhile (one the killer killed
	// just before) is stopped too: each poll looks for newcomers.
	stopped := map[int]bool{}
	stopAll := func() {
		for _, p := range d.rolePIDs(role) {
			if !stopped[p] && syscall.Kill(p, syscall.SIGSTOP) == nil {
				stopped[p] = true
			}
		}
	}
	stopAll()
	defer func() {
		for p := range stopped {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	// The message must reach a bridge to be queued: one the killer has just
	// killed may still be starting (on a loaded machine, for seconds), so
	// it is sent again (the same idempotency key) until a bridge answers.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for time.Now().Before(deadline) {
			status, _ := d.m.try("POST", "/conversations/"+d.conv+"/messages", map[string]any{"message": text}, "Idempotency-Key", key)
			if status != 0 && status != http.StatusServiceUnavailable {
				return
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	// Why a try did not kill the bridge is logged: the test fails when no
	// try did.
	seen := "no answer"
	for time.Now().Before(deadline) {
		stopAll()
		status, out := d.m.try("GET", "/conversations/"+d.conv, nil)
		c := obj(out, "conversation")
		if status == http.StatusOK && str(c, "status") == "queued" {
			bridges := d.rolePIDs("bridge")
			for _, p := range bridges {
				_ = killPID(p)
			}
			if len(bridges) == 0 {
				d.t.Logf("%s: queued, but no bridge to kill", d.conv)
				return false
			}
			d.st.queueKills.Add(1)
			return true
		}
		if status == http.StatusOK && (c["turn"] != nil || str(c, "status") == "waiting_approval") {
			d.t.Logf("%s: taken up before it showed queued (status %s, %d processes stopped)", d.conv, str(c, "status"), len(stopped))
			return false
		}
		if status == http.StatusOK {
			seen = "status " + str(c, "status")
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Logf("%s: not queued in 10 s (last %s)", d.conv, seen)
	return false
}

// rolePIDs lists the processes of role under mesh up.
func (d *chaosDriver) rolePIDs(role string) []int {
	var out []int
	for _, p := range descendants(d.upPID) {
		if args := cmdline(p); len(args) >= 2 && strings.HasSuffix(args[0], "/mesh") && args[1] == role {
			out = append(out, p)
		}
	}
	return out
}

// allMessages reads every message of the conversation, a page at a time
// (GET answers a page: messages_before is the cursor of the one before).
func (d *chaosDriver) allMessages() []any {
	var all []any
	path := "/conversations/" + d.conv + "?messages=500"
	for range 1000 {
		c := obj(d.retry("GET", path, nil), "conversation")
		all = append(list(c, "messages"), all...)
		before := c["messages_before"]
		if before == nil {
			return all
		}
		path = fmt.Sprintf("/conversations/%s?messages=500&before=%v", d.conv, before)
	}
	d.t.Fatalf("%s: the pages do not end", d.conv)
	return nil
}

// check verifies the conversation: settled, its messages those sent, once
// each and in order, and a pending approval still listed.
func (d *chaosDriver) check() {
	// Settled, as d.settle; and an approval decided in the last moments
	// may still wait for its resume: the agent that took it up may have
	// been killed, and the item comes back after the ack wait.
	meshtest.Eventually(d.t, 3*time.Minute, func() bool {
		c, idle := d.idle()
		if !idle || str(c, "status") != "waiting_approval" {
			return idle
		}
		status, ap := d.m.try("GET", "/approvals/"+str(c, "pending_approval", "uuid"), nil)
		return status == http.StatusOK && str(ap, "approval", "status") == "pending"
	}, "conversation %s keeps running, or waits for an approval already decided", d.conv)
	out := d.retry("GET", "/conversations/"+d.conv, nil)
	c := obj(out, "conversation")
	var users []string
	ids := map[string]bool{}
	twice := false
	for _, msg := range d.allMessages() {
		if ids[str(msg, "id")] {
			d.t.Errorf("%s: message %s twice", d.conv, str(msg, "id"))
			twice = true
		}
		ids[str(msg, "id")] = true
		if str(msg, "role") == "user" {
			users = append(users, str(msg, "content"))
		}
	}
	if twice {
		d.m.dumpConversation(d.t, d.conv)
	}
	if strings.Join(users, "|") != strings.Join(d.sent, "|") {
		d.t.Errorf("%s: user messages %q, sent %q", d.conv, users, d.sent)
	}
	if d.group != "" {
		// A round may end early, without a speaker, while both replicas of
		// the agents are down; it must end, by a rule.
		if ended := str(c, "group", "ended"); ended != "max_turns" && ended != "no_speaker" {
			d.t.Errorf("%s: last round ended %q, want max_turns (or no_speaker)", d.conv, ended)
		}
		if n := len(speakers(c)); n > 2*len(d.sent) {
			d.t.Errorf("%s: %d member answers to %d messages, want at most 2 each", d.conv, n, len(d.sent))
		}
	}
	switch str(c, "status") {
	case "active":
	case "waiting_approval":
		id := str(c, "pending_approval", "uuid")
		ap := d.retry("GET", "/approvals/"+id, nil)
		if str(ap, "approval", "status") != "pending" {
			d.t.Errorf("%s waits for approval %s, which is %s", d.conv, id, str(ap, "approval", "status"))
		}
	default:
		d.t.Errorf("%s ended %s", d.conv, str(c, "status"))
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
