package mesh

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nkeys"
)

const (
	// StatementType names what an [ApprovalStatement] is, so that a signature
	// made for one means nothing anywhere else.
	StatementType = "agentmesh.approval.v1"

	// How old a signed approval a tool host still honours, and how far in the
	// future its time may be (clocks of two machines). A call id is recorded in
	// the calls bucket for 7 days, so within ApprovalMaxAge a replayed approval
	// always meets the record of its call and never runs a second time.
	ApprovalMaxAge    = 24 * time.Hour
	ApprovalClockSkew = 5 * time.Minute

	// Keys of the approvals bucket that are not approvals start with '_'
	// (approval ids are UUIDs). The approver publishes each public key it signs
	// with under ApprovalKeysPrefix + key, so tool hosts without configured keys
	// learn them; only the approver may write the bucket.
	ApprovalKeysPrefix = "_keys."
	// ApprovalKeysFilter watches every published key.
	ApprovalKeysFilter = ApprovalKeysPrefix + "*"
)

// ApproverKey is the value of a published approver key.
type ApproverKey struct {
	Key  string    `json:"key"`
	Node string    `json:"node,omitempty"`
	At   time.Time `json:"at"`
}

// ApprovalStatement is what the approver signs: one decision on one call.
// The signature (Sig, base64url without padding) is ed25519, by the nkey
// whose public key is Key, over the [CanonicalJSON] of every other field
// (Sig left out). Every field is a string, so the signed bytes are
// {"approval_id":…,"args_hash":…,"at":…,"by":…,"call_id":…,"decision":…,
// "key":…,"server":…,"tool":…,"type":"agentmesh.approval.v1"} in that order
// (a seal also has "asked", between "args_hash" and "at").
//
// The approver signs two kinds: a decision (Decision approved or rejected,
// stored in [Decision.Statement] and sent with the approved call in
// [ToolRequest.Approval]), and the seal of a pending approval (Decision
// pending, [Approval.Seal]), which lets it find out later whether the record
// was rewritten. A tool host runs a call only for an approved statement.
type ApprovalStatement struct {
	Type       string `json:"type"`
	ApprovalID string `json:"approval_id"`
	// CallID is the call id the tool host runs the call under: the
	// approval id for a human decision, the model's call id for a policy's.
	CallID string `json:"call_id"`
	Server string `json:"server"`
	// Tool is the MCP name of the tool (not the function name the model saw).
	Tool string `json:"tool"`
	// ArgsHash is [ArgsHash] of the arguments decided on.
	ArgsHash string         `json:"args_hash"`
	Decision ApprovalStatus `json:"decision"`
	// By is who decided: the principal, "web", "nats", "policy:…".
	By string `json:"by"`
	// At is when, RFC 3339 in UTC with nanoseconds.
	At string `json:"at"`
	// Asked is set in a seal only: [Approval.AskedHash] of the record as
	// the approver created it, every field of what was asked (the
	// conversation, the agent, the step, the description …, not only the
	// call), so that the approver refuses to decide on a record changed
	// in any of them since. Empty, it is left out of the signed bytes.
	Asked string `json:"asked,omitempty"`
	Key   string `json:"key"`
	Sig   string `json:"sig,omitempty"`
}

// SigningInput is the bytes the signature covers.
func (s *ApprovalStatement) SigningInput() ([]byte, error) {
	c := *s
	c.Sig = ""
	return CanonicalJSON(c)
}

// Sign fills Type (when empty), Key and Sig with kp's signature.
func (s *ApprovalStatement) Sign(kp nkeys.KeyPair) error {
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("sign approval: %w", err)
	}
	if s.Type == "" {
		s.Type = StatementType
	}
	s.Key = pub
	in, err := s.SigningInput()
	if err != nil {
		return err
	}
	sig, err := kp.Sign(in)
	if err != nil {
		return fmt.Errorf("sign approval: %w", err)
	}
	s.Sig = base64.RawURLEncoding.EncodeToString(sig)
	return nil
}

// Verify checks that a key of trusted signed the statement as it is. The
// error matches [ErrApprovalInvalid].
func (s *ApprovalStatement) Verify(trusted *KeySet) error {
	if s.Type != StatementType {
		return ErrApprovalInvalid.With(fmt.Sprintf("the approval is of type %q, not %s", s.Type, StatementType))
	}
	if !trusted.Has(s.Key) {
		return ErrApprovalInvalid.With(fmt.Sprintf("the approval is signed by key %s, which is not a known approver key", short(s.Key)))
	}
	pub, err := nkeys.FromPublicKey(s.Key)
	if err != nil {
		return ErrApprovalInvalid.With(fmt.Sprintf("the approval's key %s is not an nkey: %v", short(s.Key), err))
	}
	// Strict: one signature has one spelling (no stray padding bits), so a
	// statement cannot be told apart from itself by its bytes.
	sig, err := base64.RawURLEncoding.Strict().DecodeString(s.Sig)
	if err != nil {
		return ErrApprovalInvalid.With("the approval's signature is not base64url")
	}
	in, err := s.SigningInput()
	if err != nil {
		return ErrApprovalInvalid.With("the approval cannot be encoded: " + err.Error())
	}
	if pub.Verify(in, sig) != nil {
		return ErrApprovalInvalid.With("the approval's signature does not match its content")
	}
	return nil
}

// Time is At as a time; zero when it does not parse.
func (s *ApprovalStatement) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s.At)
	return t
}

// Permits reports whether the statement, already verified, approves this
// exact call: the call id, server, tool and argument hash of the request,
// decided "approved" within [ApprovalMaxAge] of now. The error matches
// [ErrApprovalInvalid] and says what differs.
func (s *ApprovalStatement) Permits(callID, server, tool, argsHash string, now time.Time) error {
	for _, f := range []struct{ what, signed, asked string }{
		{"call id", s.CallID, callID},
		{"server", s.Server, server},
		{"tool", s.Tool, tool},
		{"arguments (hash)", s.ArgsHash, argsHash},
	} {
		if f.signed != f.asked {
			return ErrApprovalInvalid.With(fmt.Sprintf("the approval %s is for %s %q, not %q: it approves another call", s.ApprovalID, f.what, short(f.signed), short(f.asked)))
		}
	}
	if s.Decision != ApprovalApproved {
		return ErrApprovalInvalid.With(fmt.Sprintf("approval %s was %s, not approved (by %s)", s.ApprovalID, s.Decision, s.By))
	}
	at := s.Time()
	switch {
	case at.IsZero():
		return ErrApprovalInvalid.With(fmt.Sprintf("approval %s has no valid time", s.ApprovalID))
	case at.After(now.Add(ApprovalClockSkew)):
		return ErrApprovalInvalid.With(fmt.Sprintf("approval %s is dated in the future (%s)", s.ApprovalID, s.At))
	case now.Sub(at) > ApprovalMaxAge:
		return ErrApprovalInvalid.With(fmt.Sprintf("approval %s expired: decided at %s, more than %v ago", s.ApprovalID, s.At, ApprovalMaxAge))
	}
	return nil
}

// short cuts a long value for an error message: a message never echoes
// much of what was sent.
func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// KeySet is a set of trusted approver public keys, safe for concurrent use.
// Several keys make a rotation possible: the old key stays trusted until
// the approvals it signed are done.
type KeySet struct {
	mu   sync.RWMutex
	keys map[string]bool
}

// NewKeySet returns a set of keys; each must be a public nkey.
func NewKeySet(keys ...string) (*KeySet, error) {
	s := &KeySet{keys: map[string]bool{}}
	for _, k := range keys {
		if err := s.Add(k); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add trusts key.
func (s *KeySet) Add(key string) error {
	key = strings.TrimSpace(key)
	if !nkeys.IsValidPublicKey(key) {
		return fmt.Errorf("approver key %q is not a public nkey", short(key))
	}
	s.mu.Lock()
	s.keys[key] = true
	s.mu.Unlock()
	return nil
}

// Remove stops trusting key.
func (s *KeySet) Remove(key string) {
	s.mu.Lock()
	delete(s.keys, key)
	s.mu.Unlock()
}

// Has reports whether key is trusted. A nil set trusts nothing.
func (s *KeySet) Has(key string) bool {
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keys[key]
}

// List returns the keys, sorted.
func (s *KeySet) List() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
