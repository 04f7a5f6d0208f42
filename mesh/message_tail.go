package mesh

import (
	"bytes"
	"errors"
	"strconv"
)

// MessageRef locates one stored message: the stream sequence of its record
// and the size of its JSON. The messages of one record share its
// sequence; those of a record in a tail are always its last ones (a tail
// is cut from the front).
type MessageRef struct {
	Seq   uint64
	Bytes int
}

// MessageTail is the places of a conversation's newest messages, oldest
// first. It is encoded as [[seq, bytes], …], by hand: the head is decoded
// on every read, and encoding/json's way with 64 small arrays cost more
// than the rest of the head.
type MessageTail []MessageRef

// MarshalJSON encodes the tail as [[seq, bytes], …].
func (t MessageTail) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(t)*20)
	b = append(b, '[')
	for i, r := range t {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendUint(b, r.Seq, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(r.Bytes), 10)
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

// UnmarshalJSON decodes [[seq, bytes], …] (or null).
func (t *MessageTail) UnmarshalJSON(data []byte) error {
	bad := errors.New("mesh: message_tail is not [[seq, bytes], …]")
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		*t = nil
		return nil
	}
	if len(data) < 2 || data[0] != '[' || data[len(data)-1] != ']' {
		return bad
	}
	var out MessageTail
	var nums [2]uint64
	n, inPair, digits := 0, false, false
	for _, c := range data[1 : len(data)-1] {
		switch {
		case c >= '0' && c <= '9' && inPair && n < 2:
			nums[n] = nums[n]*10 + uint64(c-'0')
			digits = true
		case c == '[' && !inPair:
			inPair, n, nums, digits = true, 0, [2]uint64{}, false
		case c == ',' && inPair && digits && n == 0:
			n, digits = 1, false
		case c == ']' && inPair && digits && n == 1:
			out = append(out, MessageRef{Seq: nums[0], Bytes: int(nums[1])})
			inPair = false
		case c == ',' && !inPair, c == ' ' || c == '\n' || c == '\t' || c == '\r':
		default:
			return bad
		}
	}
	if inPair {
		return bad
	}
	*t = out
	return nil
}
