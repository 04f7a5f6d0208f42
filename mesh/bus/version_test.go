package bus

import "testing"

func TestServiceVersion(t *testing.T) {
	for in, want := range map[string]struct {
		v  string
		ok bool
	}{
		"":              {DevVersion, false},
		"v1.2.3":        {"1.2.3", true},
		"1.0.0-rc.1":    {"1.0.0-rc.1", true},
		"0.1.0-dev+abc": {"0.1.0-dev+abc", true},
		"f54b572":       {DevVersion + "+f54b572", false}, // git describe --always without tags
		"f54b572-dirty": {DevVersion + "+f54b572-dirty", false},
		"a b/c":         {DevVersion + "+a-b-c", false},
		"dev":           {DevVersion, false},
	} {
		v, ok := ServiceVersion(in)
		if v != want.v || ok != want.ok {
			t.Errorf("ServiceVersion(%q) = %q, %v; want %q, %v", in, v, ok, want.v, want.ok)
		}
		if !semverRE.MatchString(v) {
			t.Errorf("ServiceVersion(%q) = %q, which micro would refuse", in, v)
		}
	}
}
