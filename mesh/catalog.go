package mesh

import (
	"encoding/json"
	"time"
)

// ToolEntry is one tool of the catalog: what the tools bucket holds under
// <server>.<tool token>.
type ToolEntry struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is the tool's declared structured output, if any.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations are the MCP hints as the server sent them.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	// DestructiveHint is the effective hint: true when a call needs approval.
	DestructiveHint bool `json:"destructiveHint"`
	// ReadOnlyHint is the effective read-only hint.
	ReadOnlyHint bool `json:"readOnlyHint"`
	// ForwardAuth: the host sends the caller's Authorization to this tool's
	// MCP server (a streamable HTTP server), so a call carries it; calls to
	// other tools never do.
	ForwardAuth bool `json:"forward_auth,omitempty"`
	// Host is the node that last published the entry.
	Host      string    `json:"host,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ToolAnnotations are the MCP tool hints. Absent hints keep their MCP
// defaults: readOnly false, destructive true, idempotent false, openWorld true.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// ReadOnly is the effective readOnlyHint.
func (a *ToolAnnotations) ReadOnly() bool {
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint
}

// Destructive reports whether a call of the tool needs a person's
// approval: its effective destructiveHint says so, or, read from its
// annotations with MCP's defaults, it is neither read-only nor declared not
// destructive. Either saying so is enough.
func (t *ToolEntry) Destructive() bool {
	return t.DestructiveHint || !t.ReadOnlyHint && t.Annotations.Destructive()
}

// Destructive is the effective destructiveHint as MCP defines it: a tool that
// is not read-only is destructive unless it says destructiveHint: false.
func (a *ToolAnnotations) Destructive() bool {
	if a.ReadOnly() {
		return false
	}
	return a == nil || a.DestructiveHint == nil || *a.DestructiveHint
}

// ToolKey is the key of a tool in the tools bucket: <server>.<tool token>.
func ToolKey(server, tool string) (string, error) {
	if err := CheckToken(server); err != nil {
		return "", err
	}
	return server + "." + ToolToken(tool), nil
}
