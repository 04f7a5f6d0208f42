package mesh

import "time"

// Group chats: a conversation whose messages are answered by several agents
// in turn. The group role keeps the chat's position in the conversation
// (Conversation.Group), picks each speaker and hands it the turn as a work
// item on that agent's subject; the agent writes its answer and the member
// turn's result there, and tells the group with a group_next work item.

// Work kinds of the group role, on mesh.work.group.<group>.<session>.
const (
	// WorkGroupNext: the member turn TurnID ended (its result is in the
	// conversation); RunID is the run that ended it.
	WorkGroupNext WorkKind = "group_next"
	// WorkGroupCheck: is the member turn TurnID still under way, and its
	// member alive? Redelivered until the turn ends.
	WorkGroupCheck WorkKind = "group_check"
)

// CUSTOM events of group chats, published in the run of the user's message.
const (
	// CustomSpeakerSelected: value {"speaker", "strategy", "reason", "turn"}.
	CustomSpeakerSelected = "speaker_selected"
	// CustomSpeakerSkipped: value {"member", "reason"}: a member passed
	// over, e.g. because no live process serves it.
	CustomSpeakerSkipped = "speaker_skipped"
	// CustomGroupEnded: value {"reason", "turns"}: the chat answering the
	// user's message ended.
	CustomGroupEnded = "group_ended"
)

// Reasons a group chat's round ends (GroupRun.Ended, group_ended).
const (
	GroupEndMaxTurns    = "max_turns"
	GroupEndPhrase      = "termination_phrase"
	GroupEndDone        = "participant_done"
	GroupEndStopped     = "stopped"
	GroupEndNoSpeaker   = "no_speaker"
	GroupEndMemberError = "member_error"
)

// GroupRun is where a group chat stands.
type GroupRun struct {
	// Name is the group (config groups[].name).
	Name string `json:"name"`
	// Round is the exchange under way: the member turns answering one user
	// message. Nil between messages.
	Round *GroupRound `json:"round,omitempty"`
	// Recent are the last speakers, oldest first (round robin and the
	// consecutive-turn limit read them).
	Recent []string `json:"recent,omitempty"`
	// LastSpoke is when each member's last turn ended (min_interval).
	LastSpoke map[string]time.Time `json:"last_spoke,omitempty"`
	// Turns counts the member turns of the chat.
	Turns int `json:"turns"`
	// Ended says why the last round ended.
	Ended string `json:"ended,omitempty"`
}

// groupRecentKept bounds GroupRun.Recent.
const groupRecentKept = 64

// Spoke records that member ended a turn at t.
func (g *GroupRun) Spoke(member string, t time.Time) {
	g.Recent = append(g.Recent, member)
	if n := len(g.Recent); n > groupRecentKept {
		g.Recent = append([]string(nil), g.Recent[n-groupRecentKept:]...)
	}
	if g.LastSpoke == nil {
		g.LastSpoke = map[string]time.Time{}
	}
	g.LastSpoke[member] = t
	g.Turns++
}

// RecentUser is the entry of GroupRun.Recent for a user's message: it ends
// a member's run of consecutive turns.
const RecentUser = "user"

// Asked records that the user sent a message.
func (g *GroupRun) Asked() {
	g.Recent = append(g.Recent, RecentUser)
	if n := len(g.Recent); n > groupRecentKept {
		g.Recent = append([]string(nil), g.Recent[n-groupRecentKept:]...)
	}
}

// GroupRound is the chat that answers one user message.
type GroupRound struct {
	// ID is the user's turn.
	ID string `json:"id"`
	// Runs are the AG-UI runs under way: the user's turn, then the resumes
	// of approvals a member asked for; they end when the round does.
	Runs []string `json:"runs,omitempty"`
	// Turns counts the member turns taken; Seq numbers them (skipped ones
	// too), naming each: <round>-m<seq>.
	Turns int `json:"turns"`
	Seq   int `json:"seq"`
	// Pending is the member turn under way.
	Pending *GroupTurn `json:"pending,omitempty"`
	// Waiting: the pending turn waits for an approval.
	Waiting bool `json:"waiting,omitempty"`
	// Response is the last member answer.
	Response  string    `json:"response,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// Run is the AG-UI run the round's events go to now.
func (r *GroupRound) Run() string {
	if len(r.Runs) == 0 {
		return r.ID
	}
	return r.Runs[len(r.Runs)-1]
}

// GroupTurn is one member's turn.
type GroupTurn struct {
	ID       string `json:"id"`
	Speaker  string `json:"speaker"`
	Strategy string `json:"strategy,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// RunID is the AG-UI run the member publishes into.
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	// Result is the member's outcome, written by its agent when the turn
	// ends (or pauses for an approval).
	Result *RunSummary `json:"result,omitempty"`
	// EndChat: the member called end_chat.
	EndChat bool `json:"end_chat,omitempty"`
}

// MemberStarted reports whether the member's agent has taken up pending
// turn p of c: its tree run is the turn's.
func MemberStarted(c *Conversation, p *GroupTurn) bool {
	return c.Tree != nil && c.Tree.ID == p.ID
}
