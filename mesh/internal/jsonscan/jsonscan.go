// Package jsonscan walks JSON without building it: the members of a
// top-level object as raw key and value bytes, each value checked as
// encoding/json would check it. The mesh's hand-written decoders of hot
// paths (a listed conversation's summary, an OpenAI stream chunk) find the
// few fields they read with it and leave the rest unbuilt.
package jsonscan

import "bytes"

// MaxDepth bounds the nesting [SkipValue] follows; a deeper value is
// reported as not plain, for encoding/json to decide.
const MaxDepth = 64

// Members calls member with the raw key (between its quotes, escapes left
// as they are) and the raw value of each member of the JSON object that is
// the whole of data, in order. It reports false when data is not one valid
// JSON object, or as soon as member does.
func Members(data []byte, member func(key, value []byte) bool) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return SkipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		end, ok := skipString(data, i)
		if !ok {
			return false
		}
		key := data[i+1 : end-1]
		i = SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		start := SkipSpace(data, i+1)
		if i, ok = SkipValue(data, start); !ok || !member(key, data[start:i]) {
			return false
		}
		i = SkipSpace(data, i)
		switch {
		case i < len(data) && data[i] == ',':
			i = SkipSpace(data, i+1)
		case i < len(data) && data[i] == '}':
			return SkipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// SkipSpace returns the index of the first byte of data at or after i that
// is not JSON white space.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the end of the JSON value at data[i:], checked: ok is
// false when it is not valid JSON or nests deeper than [MaxDepth].
func SkipValue(data []byte, i int) (end int, ok bool) {
	return skipValue(data, i, 0)
}

func skipValue(data []byte, i, depth int) (int, bool) {
	if i >= len(data) || depth > MaxDepth {
		return i, false
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{', c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = SkipSpace(data, i+1)
		if i < len(data) && data[i] == closer {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i >= len(data) || data[i] != '"' {
					return i, false
				}
				if i, ok = skipString(data, i); !ok {
					return i, false
				}
				i = SkipSpace(data, i)
				if i >= len(data) || data[i] != ':' {
					return i, false
				}
				i = SkipSpace(data, i+1)
			}
			if i, ok = skipValue(data, i, depth+1); !ok {
				return i, false
			}
			i = SkipSpace(data, i)
			switch {
			case i < len(data) && data[i] == ',':
				i = SkipSpace(data, i+1)
			case i < len(data) && data[i] == closer:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't':
		return skipLiteral(data, i, "true")
	case c == 'f':
		return skipLiteral(data, i, "false")
	case c == 'n':
		return skipLiteral(data, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(data, i)
	}
	return i, false
}

func skipLiteral(data []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(data[i:], []byte(lit)) {
		return i, false
	}
	return i + len(lit), true
}

// skipString returns the end of the string at data[i] (a quote), past its
// closing quote.
func skipString(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(data) {
					return i, false
				}
				for _, h := range data[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

// skipNumber returns the end of the number at data[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(data []byte, i int) (int, bool) {
	digits := func() bool {
		start := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		return i > start
	}
	if data[i] == '-' {
		i++
	}
	if i < len(data) && data[i] == '0' {
		i++
	} else if !digits() {
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}
