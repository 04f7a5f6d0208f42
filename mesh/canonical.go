package mesh

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// argsHashPrefix starts every argument hash: the algorithm, then the hex
// digest.
const argsHashPrefix = "sha256:"

// CanonicalJSON is the canonical form of a JSON value, the one that
// argument hashes and approval signatures are computed over. It is close to
// RFC 8785 (JCS) and is exactly:
//
//   - the value as encoding/json decodes it into any: objects become
//     map[string]any, numbers float64 (so 1, 1.0 and 1e0 are one number, and
//     an integer beyond 2^53 is rounded, as it is for the tool that receives
//     it), strings with invalid UTF-8 get U+FFFD;
//   - encoded again by encoding/json with HTML escaping off: no whitespace,
//     object keys sorted by their bytes (UTF-8), numbers in the shortest form
//     that reads back the same (ES6 style: 1e+21, 1e-7), strings escaped only
//     where JSON requires it, plus U+2028 and U+2029.
//
// It departs from RFC 8785 in two corners: keys are sorted by UTF-8 bytes,
// not UTF-16 units (they differ only between characters above U+FFFF and
// those in U+E000-U+FFFF), and U+2028/U+2029 are escaped. v may be any
// value that encoding/json marshals, or raw JSON bytes ([json.RawMessage]).
func CanonicalJSON(v any) ([]byte, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("canonical json: %w", err)
		}
	}
	var decoded any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(decoded); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ArgsHash is the hash of a tool call's arguments: "sha256:" and the hex
// SHA-256 of their [CanonicalJSON]. No arguments (nil) hash like {}, which
// is what a tool receives then.
func ArgsHash(args map[string]any) (string, error) {
	if args == nil {
		args = map[string]any{}
	}
	c, err := CanonicalJSON(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return argsHashPrefix + hex.EncodeToString(sum[:]), nil
}
