package llm

import (
	"bytes"
	"encoding/json"
)

// This file decodes a chat.completion.chunk of an OpenAI stream. Most of
// a chunk is what the decoder drops (id, object, created, model,
// system_fingerprint) and json.Unmarshal scans it all twice, once to check
// it and once to decode it: decodeOpenAIChunk checks the chunk once by
// hand and leaves only the three fields it reads to json.Unmarshal. A
// chunk it does not take apart plainly (invalid, a field named twice or in
// another case, an escaped key) goes to json.Unmarshal whole, which
// decides as it always did.

// decodeOpenAIChunk decodes data into c as json.Unmarshal does.
func decodeOpenAIChunk(data []byte, c *openAIChunk) error {
	spans, ok := chunkFields(data)
	if !ok {
		return json.Unmarshal(data, c)
	}
	if v := spans[0]; v != nil {
		if err := json.Unmarshal(v, &c.Choices); err != nil {
			return json.Unmarshal(data, c) // its error, as before
		}
	}
	if v := spans[1]; v != nil {
		if err := json.Unmarshal(v, &c.Usage); err != nil {
			return json.Unmarshal(data, c)
		}
	}
	if v := spans[2]; v != nil {
		if err := json.Unmarshal(v, &c.Error); err != nil {
			return json.Unmarshal(data, c)
		}
	}
	return nil
}

// chunkKeys are the fields of a chunk the decoder reads, in the order of
// chunkFields' spans.
var chunkKeys = [...]string{"choices", "usage", "error"}

// chunkFields checks that data is one valid JSON object and returns the
// values of its choices, usage and error fields (nil when absent); ok is
// false when data is not that plainly (see the file's comment).
func chunkFields(data []byte) (spans [3][]byte, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return spans, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			if i >= len(data) || data[i] != '"' {
				return spans, false
			}
			end, ok := skipString(data, i)
			if !ok {
				return spans, false
			}
			key := data[i+1 : end-1]
			i = skipSpace(data, end)
			if i >= len(data) || data[i] != ':' {
				return spans, false
			}
			i = skipSpace(data, i+1)
			start := i
			if i, ok = skipValue(data, i, 0); !ok {
				return spans, false
			}
			if bytes.IndexByte(key, '\\') >= 0 {
				return spans, false // json.Unmarshal unescapes keys
			}
			for k, name := range chunkKeys {
				if string(key) == name {
					if spans[k] != nil {
						return spans, false // named twice
					}
					spans[k] = data[start:i]
				} else if asciiFold(key, name) {
					return spans, false // json.Unmarshal matches keys in any case
				}
			}
			i = skipSpace(data, i)
			if i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
				continue
			}
			if i < len(data) && data[i] == '}' {
				i++
				break
			}
			return spans, false
		}
	}
	return spans, skipSpace(data, i) == len(data)
}

// asciiFold says key, not name, may still be taken for name by
// json.Unmarshal, which matches keys in any case: it equals name but for
// case, or holds bytes past ASCII (whose folding this does not follow).
func asciiFold(key []byte, name string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return true
		}
	}
	return bytes.EqualFold(key, []byte(name))
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// maxChunkDepth bounds the nesting skipValue follows; deeper chunks go to
// json.Unmarshal.
const maxChunkDepth = 64

// skipValue returns the end of the JSON value at data[i:], checked.
func skipValue(data []byte, i, depth int) (int, bool) {
	if i >= len(data) || depth > maxChunkDepth {
		return i, false
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{':
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = skipString(data, i); !ok {
				return i, false
			}
			i = skipSpace(data, i)
			if i >= len(data) || data[i] != ':' {
				return i, false
			}
			if i, ok = skipValue(data, skipSpace(data, i+1), depth+1); !ok {
				return i, false
			}
			i = skipSpace(data, i)
			if i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
				continue
			}
			if i < len(data) && data[i] == '}' {
				return i + 1, true
			}
			return i, false
		}
	case c == '[':
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = skipValue(data, i, depth+1); !ok {
				return i, false
			}
			i = skipSpace(data, i)
			if i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
				continue
			}
			if i < len(data) && data[i] == ']' {
				return i + 1, true
			}
			return i, false
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
