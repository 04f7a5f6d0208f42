package store

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/mesh/internal/jsonscan"
)

// scanSummary fills h from data as json.Unmarshal(data, h) would, but by
// a walk of the top-level object (jsonscan): the values of the list form's
// fields are decoded alone (a string without escapes and a plain count are
// taken as they are), the other fields are checked and skipped, unbuilt.
// Every bridge reads every save of the mesh this way (listing.go). It
// reports false, h then partly filled, for what it does not read itself (a
// key with capitals, escapes or other than ASCII, which encoding/json would
// match without regard to case; not one valid object): the caller decodes
// those with encoding/json.
func scanSummary(data []byte, h *summaryHead) bool {
	return jsonscan.Members(data, func(key, value []byte) bool {
		for _, b := range key {
			if b == '\\' || b >= 0x80 || 'A' <= b && b <= 'Z' {
				return false
			}
		}
		return h.field(string(key), value)
	})
}

// field sets the field of h named key (an exact, lowercase key) from its
// JSON value v; a key of no field is skipped.
func (h *summaryHead) field(key string, v []byte) bool {
	switch key {
	case "id":
		return scanString(v, &h.ID)
	case "session_id":
		return scanString(v, &h.SessionID)
	case "agent":
		return scanString(v, &h.Agent)
	case "owner":
		return scanString(v, &h.Owner)
	case "status":
		return scanString(v, (*string)(&h.Status))
	case "title":
		return scanString(v, &h.Title)
	case "deleted_by":
		return scanString(v, &h.DeletedBy)
	case "message_count":
		if n, err := strconv.Atoi(string(v)); err == nil {
			h.MessageCount = n
			return true
		}
		return json.Unmarshal(v, &h.MessageCount) == nil
	case "created_at":
		return scanTime(v, &h.CreatedAt)
	case "updated_at":
		return scanTime(v, &h.UpdatedAt)
	case "deleted_at":
		return json.Unmarshal(v, &h.DeletedAt) == nil
	case "forked_from":
		return json.Unmarshal(v, &h.ForkedFrom) == nil
	case "messages":
		return json.Unmarshal(v, &h.Messages) == nil
	case "pending_approval":
		return json.Unmarshal(v, &h.PendingApproval) == nil
	case "queued_turn":
		return json.Unmarshal(v, &h.Queued) == nil
	case "group":
		return json.Unmarshal(v, &h.Group) == nil
	}
	return true
}

// scanString sets *s from a JSON string (null leaves it as it is, as
// encoding/json does); one without escapes is taken as it is.
func scanString(v []byte, s *string) bool {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 && plainUTF8(v[1:len(v)-1]) {
		*s = string(v[1 : len(v)-1])
		return true
	}
	return json.Unmarshal(v, s) == nil
}

// plainUTF8 reports whether b is ASCII that encoding/json keeps as it is:
// anything else (which it may replace) goes through encoding/json.
func plainUTF8(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || c < 0x20 {
			return false
		}
	}
	return true
}

// scanTime sets *t from a JSON time (null leaves it as it is).
func scanTime(v []byte, t *time.Time) bool {
	if string(v) == "null" {
		return true
	}
	return t.UnmarshalJSON(v) == nil
}
