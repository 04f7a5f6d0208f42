package e2e

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The upgrade test: each earlier state of the repository that
// testdata/upgrade/releases names is built from its commit and run on a
// data directory (a finished turn, a tree paused in a step on a pending
// approval, a group chat, and a turn queued while no agent ran); then this
// build takes the directory over, and every one of them continues.

// release is a line of testdata/upgrade/releases.
type release struct{ commit, name string }

func releases(t *testing.T) []release {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "upgrade", "releases"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []release
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		commit, name, ok := strings.Cut(line, " ")
		if !ok || len(commit) != 40 {
			t.Fatalf("testdata/upgrade/releases: %q is not \"<commit> <name>\"", line)
		}
		out = append(out, release{commit, strings.TrimSpace(name)})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// buildRelease builds the mesh binary of release r and returns a
// directory holding it beside this build's mcp-resources: the sample tool
// server is no part of what the mesh stores, and the 2026-11-21 state built
// it on cgo SQLite, a minute of C compile. Builds are kept in the user's
// cache directory by commit (the same commit builds the same binary), and
// take the flags of this build's (-race or not), so that the dependencies
// both share come compiled from the build cache.
func buildRelease(t *testing.T, r release) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	flavour := "norace"
	if raceEnabled {
		flavour = "race"
	}
	built := filepath.Join(cache, "agentmesh-e2e", "releases", r.commit+"-"+flavour, "mesh")
	if !fileExists(built) {
		buildMesh(t, r, built)
	}
	dir := t.TempDir()
	for name, target := range map[string]string{"mesh": built, "mcp-resources": filepath.Join(binDir, "mcp-resources")} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// buildMesh checks out r's commit and builds its mesh binary into path.
func buildMesh(t *testing.T, r release, path string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		needPeer(t, "git, to check out release %s", r.name)
	}
	root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", r.commit+"^{commit}").CombinedOutput(); err != nil {
		needPeer(t, "commit %s (release %s) is not in this clone (a shallow clone?): %s", r.commit, r.name, out)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, r.commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("check out release %s: %v\n%s", r.name, err, out)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	args := []string{"build", "-ldflags", "-X main.commit=" + r.commit[:7], "-o", tmp}
	if raceEnabled {
		args = append(args, "-race")
	}
	start := time.Now()
	build := exec.Command("go", append(args, "./cmd/mesh")...)
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build release %s: %v\n%s", r.name, err, out)
	}
	t.Logf("built release %s (%s) in %v", r.name, r.commit[:7], time.Since(start).Round(time.Second))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestUpgradeFromEachRelease(t *testing.T) {
	t.Parallel()
	for _, r := range releases(t) {
		t.Run(r.name, func(t *testing.T) { upgradeFrom(t, r) })
	}
}

func upgradeFrom(t *testing.T, r release) {
	old := buildRelease(t, r)
	// A sequential tree (analyzer, then executor with the resource tools)
	// and a round-robin group chat, on the offline planner.
	cfg := exampleConfig(t, "sequential") + "\ngroups:\n" + teamGroup
	// The older release logs by its own rules: only this build's log is
	// checked (the log of the last start).
	m := startMesh(t, meshOpts{config: cfg, bin: old, logName: "mesh-" + r.name + ".log"})

	// Under the older release: a finished turn, a tree paused at its
	// executor on an approval, a group chat that ran.
	done, _ := m.firstTurn("list all resources")
	tree := m.newConversation()
	ap := m.addPending(tree, "add resource upg-tree with value 5")
	apID := str(ap, "uuid")
	group := m.newGroupChat("team")
	m.send(group, "list all resources")
	spoke := len(speakers(obj(m.do(http.StatusOK, "GET", "/conversations/"+group, nil), "conversation")))
	if spoke == 0 {
		t.Fatalf("the group chat under release %s: no member spoke", r.name)
	}
	m.stop()

	// Still the older release, with no agent: a turn is queued.
	if err := os.WriteFile(m.config, []byte(cfg+"\nhttp:\n  wait_timeout: 2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.args = []string{"--replicas", "agent=0"}
	m.start()
	meshtest.Eventually(t, 60*time.Second, func() bool {
		status, _ := m.try("GET", "/conversations/"+done, nil)
		return status == http.StatusOK
	}, "the bridge of release %s did not answer", r.name)
	status, queued := m.try("POST", "/conversations/"+done+"/messages", map[string]any{"message": "list all resources"})
	queuedRun := str(queued, "run_id")
	if status != http.StatusAccepted || queuedRun == "" {
		t.Fatalf("a message with no agent under release %s: %d %v, want 202 with its run", r.name, status, queued)
	}
	m.stop()

	// This build takes the directory over.
	if err := os.WriteFile(m.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	m.bin, m.args, m.logPath = binDir, nil, filepath.Join(m.dir, "mesh.log")
	m.start()
	m.waitReady()

	// The queued turn runs.
	meshtest.Eventually(t, 60*time.Second, func() bool {
		c := obj(m.do(http.StatusOK, "GET", "/conversations/"+done, nil), "conversation")
		return str(c, "last_run", "id") == queuedRun && str(c, "status") == "active"
	}, "the turn queued under release %s did not run after the upgrade", r.name)

	// The paused tree's approval: one a release before seals recorded is
	// refused until an admin has read it and had it sealed (mesh migrate).
	status, refused := m.try("POST", "/approvals/"+apID, map[string]any{"answer": "yes"})
	switch {
	case status == http.StatusConflict && str(refused, "code") == "approval_tampered":
		if !strings.Contains(str(refused, "error"), "mesh migrate") {
			t.Errorf("the refusal does not say what to do: %v", refused)
		}
		dry := m.mustCLI(0, "", nil, "migrate")
		if !strings.Contains(dry.stdout, apID) || !strings.Contains(dry.stdout, "upg-tree") || !strings.Contains(dry.stdout, "1 pending approval(s) without a seal") {
			t.Fatalf("mesh migrate does not show the approval and its arguments:\n%s", dry)
		}
		if again, _ := m.try("POST", "/approvals/"+apID, map[string]any{"answer": "yes"}); again != http.StatusConflict {
			t.Fatalf("a dry run changed the approval: a decision answered %d", again)
		}
		if r := m.mustCLI(1, "", nil, "migrate", "--apply", done); !strings.Contains(r.stderr, "not a pending approval without a seal") {
			t.Errorf("mesh migrate --apply of an id that is none:\n%s", r)
		}
		applied := m.mustCLI(0, "", nil, "migrate", "--apply", apID)
		if !strings.Contains(applied.stdout, "sealed: a person may now decide it") {
			t.Fatalf("mesh migrate --apply:\n%s", applied)
		}
		if dry := m.mustCLI(0, "", nil, "migrate"); !strings.Contains(dry.stdout, "nothing to bring over") {
			t.Errorf("mesh migrate after --apply:\n%s", dry)
		}
		out := m.do(http.StatusOK, "POST", "/approvals/"+apID, map[string]any{"answer": "yes"})
		checkTreeResumed(t, m, out)
	case status == http.StatusOK:
		if dry := m.mustCLI(0, "", nil, "migrate"); !strings.Contains(dry.stdout, "nothing to bring over") {
			t.Errorf("mesh migrate over release %s's sealed approvals:\n%s", r.name, dry)
		}
		checkTreeResumed(t, m, refused)
	default:
		t.Fatalf("deciding release %s's approval after the upgrade: %d %v", r.name, status, refused)
	}

	// The group chat and the finished conversation go on.
	m.send(group, "list all resources")
	if n := len(speakers(obj(m.do(http.StatusOK, "GET", "/conversations/"+group, nil), "conversation"))); n <= spoke {
		t.Errorf("the group chat after the upgrade: %d answers, want more than the %d before", n, spoke)
	}
	if out := m.send(done, "list all resources"); str(out, "result", "outcome") != "success" {
		t.Errorf("a turn of the older release's conversation after the upgrade: %v", obj(out, "result"))
	}
	m.firstTurn("list all resources")
}

// checkTreeResumed checks the answer to the approval of the paused tree:
// the executor carried on and the resource exists, once.
func checkTreeResumed(t *testing.T, m *meshProc, out map[string]any) {
	t.Helper()
	if str(out, "conversation", "status") != "active" || !strings.Contains(str(out, "result", "response"), "upg-tree") {
		t.Fatalf("the tree after its approval: %v", out)
	}
	if n := m.resourceRows("upg-tree"); n != 1 {
		t.Errorf("rows of upg-tree = %d, want 1", n)
	}
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
