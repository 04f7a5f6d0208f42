package bus

import (
	"regexp"
	"strings"
)

// DevVersion is the micro service version of a build without a semver
// version (a plain `go build`, or `make build` outside a tagged checkout).
const DevVersion = "0.0.0-dev"

// semverRE is the Semantic Versioning 2.0.0 grammar, which micro services
// require of their version.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ServiceVersion is the version a micro service can announce for build
// version v: v without a leading "v" when it is semver (ok true), else
// DevVersion with v as its build metadata ("0.0.0-dev+f54b572-dirty"), so
// that `nats micro info` still names the build. A git hash from `git
// describe` is not semver, and micro refuses such a service.
func ServiceVersion(v string) (version string, ok bool) {
	if s := strings.TrimPrefix(v, "v"); semverRE.MatchString(s) {
		return s, true
	}
	var ids []string
	for _, id := range strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == '+' }) {
		ids = append(ids, strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' {
				return r
			}
			return '-'
		}, id))
	}
	if len(ids) == 0 || v == "dev" {
		return DevVersion, false
	}
	return DevVersion + "+" + strings.Join(ids, "."), false
}
