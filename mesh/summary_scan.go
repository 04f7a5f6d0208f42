package mesh

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// scanSummary fills h from data as json.Unmarshal(data, h) would, but by
// a scan of the top-level object: the values of the list form's fields
// are decoded alone (a string without escapes and a plain count are taken
// as they are), the other fields are skipped by their brackets and
// strings, unbuilt and unchecked. Every bridge reads every save of the
// mesh this way (listing.go), and every save is encoding/json's: a head
// that is not valid JSON only in a field the list form does not show is
// listed rather than refused. It reports false, h then partly filled, for
// what it does not read itself (a key with capitals, escapes or other
// than ASCII, which encoding/json would match without regard to case; not
// an object): the caller decodes those with encoding/json.
func scanSummary(data []byte, h *summaryHead) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return true
	}
	for i < len(data) {
		if data[i] != '"' {
			return false
		}
		end := skipValue(data, i)
		if end < 0 {
			return false
		}
		key := data[i+1 : end-1]
		for _, b := range key {
			if b == '\\' || b >= 0x80 || 'A' <= b && b <= 'Z' {
				return false
			}
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		end = skipValue(data, i)
		if end < 0 || !h.field(string(key), data[i:end]) {
			return false
		}
		i = skipSpace(data, end)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(data, i+1)
		default:
			return false
		}
	}
	return false
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

// skipSpace returns the index of the first byte of data at or after i that
// is not JSON white space.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index just after the JSON value that starts at
// data[i], or -1: it follows brackets and strings, and checks nothing
// else.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		for j := i + 1; j < len(data); j++ {
			switch data[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end := skipValue(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}
