package mesh

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"keys sorted", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"whitespace dropped", "{ \"a\" : [ 1 , 2 ] }\n", `{"a":[1,2]}`},
		{"nested", `{"z":{"y":[{"b":true,"a":null}]},"a":"x"}`, `{"a":"x","z":{"y":[{"a":null,"b":true}]}}`},
		{"one number", `[1, 1.0, 1e0, 10E-1]`, `[1,1,1,1]`},
		{"shortest numbers", `[0.1, 1e21, 1e-7, 123456789012, -0.5]`, `[0.1,1e+21,1e-7,123456789012,-0.5]`},
		{"integers beyond 2^53 as float64", `[9007199254740993]`, `[9007199254740992]`},
		{"no HTML escaping", `{"s":"<a href='x'>&</a>"}`, `{"s":"<a href='x'>&</a>"}`},
		{"unicode kept", `{"s":"é€😀","\u00e9":1}`, `{"s":"é€😀","é":1}`},
		{"escapes only where needed", `{"s":"\u0041\t\"\\\/\u0001"}`, `{"s":"A\t\"\\/\u0001"}`},
		{"line separators escaped", "{\"s\":\"a\u2028b\"}", `{"s":"a\u2028b"}`},
		{"keys by UTF-8 bytes", `{"é":1,"z":2,"Z":3,"a":4}`, `{"Z":3,"a":4,"z":2,"é":1}`},
		{"empty", `{}`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON(json.RawMessage(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("CanonicalJSON(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
	if _, err := CanonicalJSON(json.RawMessage(`{"a":`)); err == nil {
		t.Error("malformed JSON: no error")
	}
}

func TestArgsHash(t *testing.T) {
	sum := sha256.Sum256([]byte(`{"name":"web-1","value":7}`))
	want := "sha256:" + hex.EncodeToString(sum[:])
	for _, args := range []map[string]any{
		{"value": 7, "name": "web-1"},
		{"name": "web-1", "value": 7.0},
		{"value": json.Number("7"), "name": "web-1"},
	} {
		got, err := ArgsHash(args)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("ArgsHash(%v) = %s, want %s", args, got, want)
		}
	}
	empty, _ := ArgsHash(map[string]any{})
	none, _ := ArgsHash(nil)
	if empty != none {
		t.Errorf("no arguments hash %s, {} hashes %s: a tool receives {} for both", none, empty)
	}
	other, _ := ArgsHash(map[string]any{"name": "web-1", "value": 8})
	if other == want {
		t.Error("other arguments, same hash")
	}
}

// FuzzCanonicalJSON: the canonical form of a JSON value is stable (its own
// canonical form), and does not depend on how the value was written
// (re-indented, keys reordered by a round trip).
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"d":null,"c":"<>&"}]}`, `[1e21,0.1,-0,1e-7]`, `"\u2028é"`, `{"":{"":[]}}`, `9007199254740993`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CanonicalJSON(json.RawMessage(s))
		if err != nil {
			return // not JSON
		}
		again, err := CanonicalJSON(json.RawMessage(c))
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("canonical form of %q is not stable: %s then %s (%v)", s, c, again, err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, []byte(s), "", "  "); err != nil {
			t.Fatalf("valid JSON %q does not indent: %v", s, err)
		}
		other, err := CanonicalJSON(json.RawMessage(indented.Bytes()))
		if err != nil || !bytes.Equal(other, c) {
			t.Fatalf("%q written otherwise has another canonical form: %s, not %s (%v)", s, other, c, err)
		}
	})
}
