package core

// Position is the stream sequence a follower has delivered up to: for a
// follower of [FromNow], the last sequence of the events stream when it
// started. A client that saw everything delivered so far resumes after it.
func (f *Follower) Position() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.after
}
