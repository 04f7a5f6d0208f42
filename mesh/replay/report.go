package replay

import (
	"time"

	"github.com/agentmesh/agentmesh/mesh"
)

// Call is one tool call as a report shows it.
type Call struct {
	// Tool is <server>/<tool> for a catalog tool, the function name the
	// model used for any other (a sub-agent, a built-in, an unknown tool).
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	// StandIn: the replay did not run the call (a tool that is not
	// read-only, a sub-agent) and answered the model with the stand-in.
	StandIn bool `json:"stand_in,omitempty"`
}

// Turn is one user message of a conversation and what answered it.
type Turn struct {
	User string `json:"user"`
	// Answer is the last text the agent answered the turn with (notices
	// left out).
	Answer string `json:"answer"`
	Calls  []Call `json:"calls,omitempty"`
}

// Source is a recorded conversation to replay: where it came from and its
// turns, oldest first.
type Source struct {
	// ID is the recorded conversation's id, or <file>:<line> for a
	// conversation of a JSONL file.
	ID string `json:"id"`
	// Agent is the agent that served the recording, when known.
	Agent string `json:"agent,omitempty"`
	Turns []Turn `json:"turns"`
	// Recorded: the turns carry the recording's answers and calls; a
	// conversation of a JSONL file has only the user messages.
	Recorded bool `json:"recorded"`
}

// Kinds of a compared call position.
const (
	CallSame      = "same"
	CallDifferent = "different"
	CallAdded     = "added"
	CallMissing   = "missing"
)

// CallDiff is how one position of a turn's calls compares.
type CallDiff struct {
	Position int    `json:"position"`
	Kind     string `json:"kind"`
	Original *Call  `json:"original,omitempty"`
	Replay   *Call  `json:"replay,omitempty"`
}

// Counts are the differences of a turn, a conversation or a whole run.
type Counts struct {
	Turns int `json:"turns"`
	// SameCalls … MissingCalls count compared call positions (package doc).
	SameCalls      int `json:"same_calls"`
	DifferentCalls int `json:"different_calls"`
	AddedCalls     int `json:"added_calls"`
	MissingCalls   int `json:"missing_calls"`
	// ProposedCalls are the replay's calls not run (stand-ins).
	ProposedCalls int `json:"proposed_calls"`
	// ChangedAnswers counts turns whose answer text differs (surrounding
	// white space aside); compared only for recorded turns.
	ChangedAnswers int `json:"changed_answers"`
	// ComparedAnswers counts the turns whose answers were compared.
	ComparedAnswers int `json:"compared_answers"`
	// FailedTurns are replayed turns that ended in an error (or not at all).
	FailedTurns int `json:"failed_turns"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Turns += o.Turns
	c.SameCalls += o.SameCalls
	c.DifferentCalls += o.DifferentCalls
	c.AddedCalls += o.AddedCalls
	c.MissingCalls += o.MissingCalls
	c.ProposedCalls += o.ProposedCalls
	c.ChangedAnswers += o.ChangedAnswers
	c.ComparedAnswers += o.ComparedAnswers
	c.FailedTurns += o.FailedTurns
}

// ChangedRatio is the share of compared answers that changed (0 when none
// was compared).
func (c Counts) ChangedRatio() float64 {
	if c.ComparedAnswers == 0 {
		return 0
	}
	return float64(c.ChangedAnswers) / float64(c.ComparedAnswers)
}

// Latency is the distribution of the replayed turns' durations, from the
// work item's publish to the run's settled end, in milliseconds.
type Latency struct {
	Turns int     `json:"turns"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Prices are the model's prices, in a currency per million tokens.
type Prices struct {
	Input    float64 `json:"input_per_million"`
	Output   float64 `json:"output_per_million"`
	Currency string  `json:"currency,omitempty"`
}

// Cost is what usage costs at p.
func (p *Prices) Cost(u mesh.Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output) / 1e6
}

// TurnReport is one turn, recorded and replayed.
type TurnReport struct {
	Index int    `json:"index"`
	User  string `json:"user"`
	// Original and Replay are the answers, side by side.
	Original      string     `json:"original_answer,omitempty"`
	Replay        string     `json:"replay_answer"`
	AnswerChanged bool       `json:"answer_changed,omitempty"`
	Calls         []CallDiff `json:"calls,omitempty"`
	// Proposed are the replay's calls not run, with their arguments.
	Proposed  []Call      `json:"proposed,omitempty"`
	Counts    Counts      `json:"counts"`
	LatencyMS float64     `json:"latency_ms"`
	Usage     *mesh.Usage `json:"usage,omitempty"`
	// Error says why the replayed turn failed (its run's error), if it did.
	Error string `json:"error,omitempty"`
}

// ConversationReport is one recorded conversation and its replay.
type ConversationReport struct {
	Source string `json:"source"`
	// Conversation is the replay's conversation (removed after the run
	// unless kept).
	Conversation string       `json:"conversation"`
	Counts       Counts       `json:"counts"`
	Latency      Latency      `json:"latency"`
	Usage        mesh.Usage   `json:"usage"`
	Cost         *float64     `json:"cost,omitempty"`
	Turns        []TurnReport `json:"turns"`
	// Error says why the conversation could not be replayed at all.
	Error string `json:"error,omitempty"`
}

// Thresholds are the differences a run tolerates; a negative field (the
// default) checks nothing.
type Thresholds struct {
	MaxDifferentCalls int     `json:"max_different_calls"`
	MaxAddedCalls     int     `json:"max_added_calls"`
	MaxMissingCalls   int     `json:"max_missing_calls"`
	MaxProposedCalls  int     `json:"max_proposed_calls"`
	MaxFailedTurns    int     `json:"max_failed_turns"`
	MaxChangedAnswers float64 `json:"max_changed_answers"`
}

// NoThresholds checks nothing.
func NoThresholds() Thresholds {
	return Thresholds{-1, -1, -1, -1, -1, -1}
}

// Report is the outcome of one replay run.
type Report struct {
	ID         string    `json:"id"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Agent is the replay's agent name; Model the model it called; Config
	// the configuration file it ran.
	Agent  string `json:"agent"`
	Model  string `json:"model"`
	Config string `json:"config"`
	// Selection says which conversations were replayed.
	Selection string `json:"selection"`
	StandIn   string `json:"stand_in"`
	// Totals add up every conversation's counts.
	Totals     Counts     `json:"totals"`
	Latency    Latency    `json:"latency"`
	Usage      mesh.Usage `json:"usage"`
	Prices     *Prices    `json:"prices,omitempty"`
	Cost       *float64   `json:"cost,omitempty"`
	Thresholds Thresholds `json:"thresholds"`
	// Exceeded names the thresholds the totals went over; the command
	// exits non-zero when it is not empty.
	Exceeded      []string             `json:"exceeded,omitempty"`
	Conversations []ConversationReport `json:"conversations"`
	// Trimmed: the stored copy left out the turns' texts to fit the
	// bucket; the counts are whole.
	Trimmed bool `json:"trimmed,omitempty"`
}

// Summary is a report as a list shows it.
type Summary struct {
	ID            string    `json:"id"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	Model         string    `json:"model"`
	Config        string    `json:"config"`
	Selection     string    `json:"selection"`
	Conversations int       `json:"conversations"`
	Totals        Counts    `json:"totals"`
	Exceeded      []string  `json:"exceeded,omitempty"`
}

// Summary is r as a list shows it.
func (r *Report) Summary() Summary {
	return Summary{ID: r.ID, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Model: r.Model, Config: r.Config,
		Selection: r.Selection, Conversations: len(r.Conversations), Totals: r.Totals, Exceeded: r.Exceeded}
}
