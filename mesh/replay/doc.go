// Package replay holds what a replay of recorded conversations produces:
// the report (report.go), the comparison of a recorded turn with its
// replay (compare.go), the turns of a conversation as it compares them
// (turns.go), the thresholds a run checks (thresholds.go) and the report's
// HTML page (html.go).
//
// `mesh replay` (cmd/mesh) runs the user turns of recorded conversations
// against another agent configuration and fills a [Report]; the bridge
// serves stored reports (GET /replays) and renders them with [WriteHTML].
// The package does no I/O of its own and starts no goroutine.
//
// # Comparing tool calls
//
// The calls of a turn are compared by position: the k-th call of the
// recording with the k-th call of the replay. At a position both have, a
// call of the same tool (server and tool name) with equal arguments (as
// canonical JSON) is the same, with other arguments different; calls of
// two different tools are one missing (the recording's) and one added
// (the replay's). Positions only the recording has are missing, positions
// only the replay has are added. A turn only one side has counts all its
// calls as missing or added.
package replay
