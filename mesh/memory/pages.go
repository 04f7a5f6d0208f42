package memory

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// A mapping is one line of /proc/<pid>/smaps and the fields of it that
// DropFilePages reads.
type mapping struct {
	start, end uint64
	perms      string
	path       string
	anonymous  uint64 // kB of private copies (pages written, or relocated)
}

// fileMappings reads smaps and returns the mappings of files (the program,
// its shared libraries) that the process may unmap and fault in again
// unchanged: read-only (code, or read-only data), private, and with no page
// of their own (a page of a private mapping that was ever written, such as
// a relocation the dynamic linker applied before it made the range
// read-only, is a copy that exists nowhere else; such a mapping is skipped
// whole).
func fileMappings(smaps io.Reader) []mapping {
	var out []mapping
	var cur *mapping
	keep := func() {
		if cur != nil && strings.HasPrefix(cur.path, "/") && (cur.perms == "r-xp" || cur.perms == "r--p") && cur.anonymous == 0 {
			out = append(out, *cur)
		}
	}
	s := bufio.NewScanner(smaps)
	for s.Scan() {
		line := s.Text()
		if m, ok := parseMappingHeader(line); ok {
			keep()
			cur = &m
			continue
		}
		if cur == nil {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Anonymous:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil || kb > 0 {
				cur.anonymous = max(kb, 1) // unreadable counts as written
			}
		}
	}
	keep()
	return out
}

// parseMappingHeader reads a mapping's first line: "start-end perms offset
// dev inode [path]". The path is the rest of the line (it may hold spaces).
func parseMappingHeader(line string) (mapping, bool) {
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return mapping{}, false
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start || len(fields[1]) != 4 {
		return mapping{}, false
	}
	m := mapping{start: start, end: end, perms: fields[1]}
	if len(fields) > 5 {
		// The path starts after the inode, past the spaces that align it.
		rest := line
		for range 5 {
			rest = strings.TrimLeft(rest, " ")
			if i := strings.IndexByte(rest, ' '); i >= 0 {
				rest = rest[i:]
			}
		}
		m.path = strings.TrimLeft(rest, " ")
	}
	return m, true
}
