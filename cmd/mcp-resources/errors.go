package main

import "errors"

// Errors a tool reports as its own failure (an isError result). Their text is
// what the model reads, so it says what to change.
var (
	// ErrEmptyName is returned by resources_add for a blank name.
	ErrEmptyName = errors.New("name must not be empty")
	// ErrBadPattern wraps a pattern that is not a valid regular expression.
	ErrBadPattern = errors.New("invalid pattern")
	// ErrNoSelector is returned by resources_remove without id or pattern.
	ErrNoSelector = errors.New("id or pattern is required")
	// ErrBadCallID is returned when _meta holds a call id that is not a
	// non-empty string.
	ErrBadCallID = errors.New(`_meta "` + callIDMetaKey + `" must be a non-empty string`)
	// ErrCallIDReused is returned when a call id recorded for one tool is
	// sent again with another.
	ErrCallIDReused = errors.New("call id already used by another tool")
)
