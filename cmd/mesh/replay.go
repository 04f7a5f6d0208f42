package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/replay"
	"github.com/agentmesh/agentmesh/nodes/agent"
)

// mesh replay runs recorded conversations' user turns against another
// agent configuration and reports what changed (replay_run.go runs it,
// replay_source.go picks the conversations). It connects with the replay
// identity (<data_dir>/creds/replay.nk), which may run read-only tools and
// nothing else.

// exitThresholds is the exit code of a replay whose differences exceed a
// threshold given on the command line.
const exitThresholds = 3

// errThresholds marks a replay that ran but exceeded a threshold.
var errThresholds = errors.New("thresholds exceeded")

const replayLong = `Run recorded conversations again against another agent configuration, and
report what changed: tool calls the same, different (same tool, other
arguments), added and missing, answers side by side, tokens, cost and latency.

  mesh replay --config new.yaml ID...              these conversations
  mesh replay --config new.yaml --since 168h       those created in the last week (--until, --agent, --limit)
  mesh replay --config new.yaml --file convs.jsonl  conversations of user messages, one per line

Each conversation's user messages are sent in order to a conversation of its
own, run by an agent of this process under the name replay-<run id>, on a work
queue no live agent takes from (--concurrency conversations at a time, at most
--rate turns a second). Only read-only tools run: a call of any other tool or of
a sub-agent is never run nor sent for approval; the model gets the stand-in
result (--stand-in) and the report lists the call as proposed.

The report is printed (--json: as JSON), written to --out and --html when given,
and stored in the mesh (GET /replays/{id} on the bridge, for admins). The replay's
conversations are removed afterwards unless --keep.

Exit status: 0 within the thresholds, 3 when a --max-… threshold is exceeded,
1 when the replay could not run, 2 for a usage or configuration error.

It connects to NATS as the replay identity (<data_dir>/creds/replay.nk, or
NATS_NKEY / NATS_CREDS with {role}).`

// replayOptions are the flags of mesh replay.
type replayOptions struct {
	config      string
	agentName   string
	file        string
	since       string
	until       string
	agent       string
	limit       int
	concurrency int
	rate        float64
	standIn     string
	turnTimeout time.Duration
	out         string
	html        string
	keep        bool
	json        bool
	priceIn     float64
	priceOut    float64
	currency    string
	thresholds  replay.Thresholds
}

func replayCommand() *cobra.Command {
	o := &replayOptions{thresholds: replay.NoThresholds()}
	cmd := &cobra.Command{
		Use:   "replay --config FILE [ID...]",
		Short: "run recorded conversations against another agent configuration and report what changed",
		Long:  replayLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runReplay(ctx, o, args, os.Stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "the agent configuration to replay against (agent.yaml's format: llm.model, prompt, agent tree, tools); required")
	f.StringVar(&o.agentName, "agent-of-config", "", "which agent of --config to run (default: its top-level agent)")
	f.StringVar(&o.file, "file", "", "a JSONL file of conversations to replay, one a line (docs/replay.md)")
	f.StringVar(&o.since, "since", "", "replay conversations created since this time (RFC 3339, or a duration back from now: 168h)")
	f.StringVar(&o.until, "until", "", "… and before this time (RFC 3339, or a duration back from now)")
	f.StringVar(&o.agent, "agent", "", "replay only conversations of this agent")
	f.IntVar(&o.limit, "limit", 0, "replay at most this many conversations, the newest (0: all)")
	f.IntVar(&o.concurrency, "concurrency", 4, "conversations replayed at a time")
	f.Float64Var(&o.rate, "rate", 2, "turns started a second, at most (0: no limit)")
	f.StringVar(&o.standIn, "stand-in", "", "the result a call that is not run answers the model with (JSON or text; default: a not-run notice)")
	f.DurationVar(&o.turnTimeout, "turn-timeout", 5*time.Minute, "how long one replayed turn may take")
	f.StringVar(&o.out, "out", "", "write the JSON report to this file")
	f.StringVar(&o.html, "html", "", "write the HTML report to this file")
	f.BoolVar(&o.keep, "keep", false, "keep the replay's conversations (admins see them) instead of removing them")
	f.BoolVar(&o.json, "json", false, "print the JSON report instead of a summary")
	f.Float64Var(&o.priceIn, "price-input", 0, "the model's price per million input tokens (with --price-output: the report shows a cost)")
	f.Float64Var(&o.priceOut, "price-output", 0, "the model's price per million output tokens")
	f.StringVar(&o.currency, "currency", "USD", "the currency of the prices")
	th := &o.thresholds
	f.IntVar(&th.MaxDifferentCalls, "max-different-calls", -1, "exit 3 when more calls than this differ in arguments (-1: no limit)")
	f.IntVar(&th.MaxAddedCalls, "max-added-calls", -1, "exit 3 when the replay adds more calls than this")
	f.IntVar(&th.MaxMissingCalls, "max-missing-calls", -1, "exit 3 when the replay misses more calls than this")
	f.IntVar(&th.MaxProposedCalls, "max-proposed-calls", -1, "exit 3 when the replay proposes more calls that are not read-only than this")
	f.IntVar(&th.MaxFailedTurns, "max-failed-turns", -1, "exit 3 when more replayed turns than this fail")
	f.Float64Var(&th.MaxChangedAnswers, "max-changed-answers", -1, "exit 3 when the share of changed answers exceeds this ratio, 0 to 1")
	return cmd
}

// check validates the flags that need no mesh.
func (o *replayOptions) check(ids []string) error {
	if o.config == "" {
		return usageErr("--config: the agent configuration to replay against is required")
	}
	sources := 0
	if len(ids) > 0 {
		sources++
	}
	if o.file != "" {
		sources++
	}
	if o.since != "" || o.until != "" || o.agent != "" {
		sources++
	}
	if sources != 1 {
		return usageErr("name the conversations one way: IDs, --file, or --since/--until/--agent")
	}
	if o.concurrency < 1 || o.concurrency > 256 {
		return usageErr("--concurrency %d: want 1 to 256", o.concurrency)
	}
	if o.rate < 0 {
		return usageErr("--rate %v: want 0 (no limit) or more", o.rate)
	}
	if o.turnTimeout <= 0 {
		return usageErr("--turn-timeout %v: want a positive duration", o.turnTimeout)
	}
	if r := o.thresholds.MaxChangedAnswers; r > 1 {
		return usageErr("--max-changed-answers %v: want a ratio from 0 to 1 (or -1)", r)
	}
	if o.priceIn < 0 || o.priceOut < 0 {
		return usageErr("--price-input and --price-output are not negative")
	}
	return nil
}

// standInResult is the stand-in the model gets: the flag's JSON as given,
// its text as a JSON string field, or the default notice.
func (o *replayOptions) standInResult() string {
	s := strings.TrimSpace(o.standIn)
	switch {
	case s == "":
		return agent.DefaultStandIn
	case json.Valid([]byte(s)):
		return s
	}
	b, _ := json.Marshal(map[string]string{"not_run": "replay", "result": s})
	return string(b)
}

// prices is the price table of the flags, nil without one.
func (o *replayOptions) prices() *replay.Prices {
	if o.priceIn == 0 && o.priceOut == 0 {
		return nil
	}
	return &replay.Prices{Input: o.priceIn, Output: o.priceOut, Currency: o.currency}
}

// replayConfig is the mesh's configuration as the replay connects with
// it: the mesh context's NATS URL, and the replay identity beside the
// context's admin key (a terminal command's context names the admin's).
func replayConfig() (*config.Config, error) {
	cfg, err := config.FromEnvironment()
	if err != nil {
		return nil, err
	}
	mc, err := loadContext(cfg)
	if err != nil || mc == nil {
		return cfg, err
	}
	if mc.NATSURL != "" && cfg.NATS.URL == "" && os.Getenv(config.EnvNATSAddr) == "" {
		cfg.NATS.URL = mc.NATSURL
	}
	if cfg.NATS.Creds == "" && cfg.NATS.NKey == "" {
		for _, p := range []struct {
			ctx  string
			file func(dir, role string) string
			set  *string
		}{{mc.NKey, identity.SeedFile, &cfg.NATS.NKey}, {mc.Creds, identity.CredsFile, &cfg.NATS.Creds}} {
			if p.ctx == "" {
				continue
			}
			if own := p.file(filepath.Dir(p.ctx), mesh.RoleReplay); fileExists(own) {
				*p.set = own
			}
		}
	}
	return cfg, nil
}

// runReplay runs mesh replay and prints its outcome to w.
func runReplay(ctx context.Context, o *replayOptions, ids []string, w io.Writer) error {
	if err := o.check(ids); err != nil {
		return err
	}
	cfg, err := replayConfig()
	if err != nil {
		return err
	}
	alt, err := config.Load(o.config, os.Getenv)
	if err != nil {
		return err
	}
	r, err := newReplayRun(ctx, cfg, alt, o)
	if err != nil {
		return err
	}
	defer r.close()
	sources, selection, err := r.sources(ctx, ids)
	if err != nil {
		return err
	}
	if len(sources) == 0 {
		return fmt.Errorf("no conversation to replay: %s", selection)
	}
	report, err := r.run(ctx, sources, selection)
	if err != nil {
		return err
	}
	if err := r.publish(ctx, report); err != nil {
		return err
	}
	if err := printReport(w, report, o); err != nil {
		return err
	}
	if len(report.Exceeded) > 0 {
		return fmt.Errorf("%w: %s", errThresholds, strings.Join(report.Exceeded, "; "))
	}
	return nil
}

// printReport prints the report's summary, or its JSON.
func printReport(w io.Writer, r *replay.Report, o *replayOptions) error {
	if o.json {
		return writeJSON(w, r)
	}
	t := r.Totals
	fmt.Fprintf(w, "replay %s: %d conversations, %d turns (%d failed) against %s (%s)\n", r.ID, len(r.Conversations), t.Turns, t.FailedTurns, r.Config, r.Model)
	fmt.Fprintf(w, "tool calls: %d same, %d different, %d added, %d missing; %d proposed, not run\n", t.SameCalls, t.DifferentCalls, t.AddedCalls, t.MissingCalls, t.ProposedCalls)
	fmt.Fprintf(w, "answers: %d of %d changed\n", t.ChangedAnswers, t.ComparedAnswers)
	fmt.Fprintf(w, "latency per turn: p50 %.0f ms, p99 %.0f ms; tokens: %d in, %d out", r.Latency.P50, r.Latency.P99, r.Usage.InputTokens, r.Usage.OutputTokens)
	if r.Cost != nil {
		fmt.Fprintf(w, "; cost %.4f %s", *r.Cost, r.Prices.Currency)
	}
	fmt.Fprintln(w)
	for _, e := range r.Exceeded {
		fmt.Fprintf(w, "threshold exceeded: %s\n", e)
	}
	return nil
}
