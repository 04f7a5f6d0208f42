package llm

import (
	"bytes"
	"encoding/json"

	"github.com/agentmesh/agentmesh/mesh/internal/jsonscan"
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
	ok = jsonscan.Members(data, func(key, value []byte) bool {
		if bytes.IndexByte(key, '\\') >= 0 {
			return false // json.Unmarshal unescapes keys
		}
		for k, name := range chunkKeys {
			if string(key) == name {
				if spans[k] != nil {
					return false // named twice
				}
				spans[k] = value
			} else if asciiFold(key, name) {
				return false // json.Unmarshal matches keys in any case
			}
		}
		return true
	})
	return spans, ok
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
