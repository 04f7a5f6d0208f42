package toolhost

import (
	"errors"
	"fmt"
	"net/http"
)

// Errors of [New] and [Role.Run]. Errors that cross NATS are mesh sentinels
// (mesh.ErrToolUnavailable, mesh.ErrCallInterrupted …), not these.
var (
	// ErrInvalidConfig reports a [Config] that cannot work.
	ErrInvalidConfig = errors.New("toolhost: invalid config")
	// ErrRunning reports a second [Role.Run] while one is running.
	ErrRunning = errors.New("toolhost: already running")
)

// authError is what the HTTP transport returns instead of a 401 or 403
// answer to a tools/call: the SDK would otherwise take the answer for a
// broken connection, and one caller's bad token must not cut the session
// that every caller shares.
type authError struct {
	status int
}

func (e *authError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.status, http.StatusText(e.status))
}
