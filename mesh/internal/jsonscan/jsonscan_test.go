package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMembers(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string // key=value of each member; nil when Members reports false
	}{
		{`{}`, []string{}},
		{` { "a" : 1 , "b":[true,false,null,{"c":"d\u00e9\n"}], "e":-0.5e+3 } `, []string{`a=1`, `b=[true,false,null,{"c":"d\u00e9\n"}]`, `e=-0.5e+3`}},
		{`{"k\"ey":"v"}`, []string{`k\"ey="v"`}},
		{`[]`, nil},
		{`{"a":1,}`, nil},
		{`{"a":1} x`, nil},
		{`{"a":01}`, nil},
		{`{"a":"\x"}`, nil},
		{`{"a":"` + "\x01" + `"}`, nil},
		{`{"a":tru}`, nil},
		{`{"a":[1 2]}`, nil},
		{`{"a":{"b"}}`, nil},
		{`{"a":` + strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2) + `}`, nil},
	} {
		got := []string{}
		ok := Members([]byte(tt.in), func(k, v []byte) bool {
			got = append(got, string(k)+"="+string(v))
			return true
		})
		if !ok {
			got = nil
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || (got == nil) != (tt.want == nil) {
			t.Errorf("Members(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if ok && !json.Valid([]byte(tt.in)) {
			t.Errorf("Members(%q) took JSON that is not valid", tt.in)
		}
	}
}

func TestMembersStopsWhenAsked(t *testing.T) {
	n := 0
	if Members([]byte(`{"a":1,"b":2,"c":3}`), func(_, _ []byte) bool { n++; return n < 2 }) || n != 2 {
		t.Fatalf("Members went on after false: %d members seen", n)
	}
}

func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x",null]}`, `"\u12"`, `-1.5e`, `[[]]`, `{"a" 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		end, ok := SkipValue(data, 0)
		if ok && end == len(data) && !json.Valid(data) {
			t.Fatalf("%q taken as one value", data)
		}
	})
}
