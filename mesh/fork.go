package mesh

// A branch is a conversation forked from another at a point: its history
// is the original's up to that point, read from the original's records
// (shared, not copied), and what it adds is its own. Its head names where
// the shared part is ([SharedRecords]); every conversation whose records a
// branch reads has granted it that read with a record of its own log, so a
// head cannot name records its conversation was never given.

// ForkPoint is where a branch was forked: the conversation, the last
// message it keeps (empty when it keeps none) and the last event of the
// original that the branch's state reflects (its stream sequence).
type ForkPoint struct {
	Conversation string `json:"conversation"`
	Message      string `json:"message"`
	EventSeq     uint64 `json:"event_seq"`
}

// SharedRecords is a part of a branch's history that another
// conversation's log holds: that conversation's records up to the one at
// Seq, and of that record its first Count messages. Grant is the sequence
// of the record of that conversation's log that let the branch read them.
// The records of a branch's Shared entries never overlap: each entry
// holds the records after the next entry's Seq (the entries are nearest
// first, their Seq decreasing).
type SharedRecords struct {
	Conversation string `json:"conversation"`
	Seq          uint64 `json:"seq"`
	Count        int    `json:"count"`
	Grant        uint64 `json:"grant"`
}
