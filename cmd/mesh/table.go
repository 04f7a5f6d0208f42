package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// table prints the lists of the terminal commands: columns two spaces
// apart and, at a terminal, as wide as it is: ids cut to idShort runes
// (every command taking an id takes such a prefix) and the last column,
// free text, cut with "…" to what is left. In a pipe every cell is whole.
type table struct {
	head []string
	rows [][]string
	// ids are the columns holding ids.
	ids map[int]bool
}

// idShort is how much of an id a table at a terminal shows: like a short
// commit hash, enough to be unique among a mesh's pending approvals or
// conversations, and accepted back by show, yes, no and rm.
const idShort = 8

func newTable(head ...string) *table { return &table{head: head, ids: map[int]bool{}} }

// idColumns marks the columns of ids.
func (t *table) idColumns(cols ...int) *table {
	for _, c := range cols {
		t.ids[c] = true
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// print writes the table for a terminal width columns wide (0: no limit).
func (t *table) print(w io.Writer, width int) error {
	rows := append([][]string{t.head}, t.rows...)
	if width > 0 {
		for _, r := range rows[1:] {
			for c := range r {
				if t.ids[c] && utf8.RuneCountInString(r[c]) > idShort {
					r[c] = string([]rune(r[c])[:idShort])
				}
			}
		}
	}
	n := len(t.head)
	widths := make([]int, n)
	for _, r := range rows {
		for c := 0; c < n && c < len(r); c++ {
			widths[c] = max(widths[c], utf8.RuneCountInString(r[c]))
		}
	}
	if width > 0 {
		others := 2 * (n - 1)
		for c := 0; c < n-1; c++ {
			others += widths[c]
		}
		widths[n-1] = min(widths[n-1], max(width-others, len(t.head[n-1]), 12))
	}
	var b strings.Builder
	for _, r := range rows {
		for c := 0; c < n; c++ {
			cell := ""
			if c < len(r) {
				cell = r[c]
			}
			if c == n-1 {
				b.WriteString(cut(cell, widths[c]))
				break
			}
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[c]-utf8.RuneCountInString(cell)+2))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cut is s in at most n runes, its end replaced by "…" when cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:max(n-1, 0)]) + "…"
}

// stdoutWidth is the width of the terminal on stdout, 0 in a pipe.
func stdoutWidth() int {
	fd := int(os.Stdout.Fd())
	if !term.IsTerminal(fd) {
		return 0
	}
	w, _, err := term.GetSize(fd)
	if err != nil {
		return 0
	}
	return w
}

// byPrefix is the one of ids that starts with prefix: prefix itself when it
// is a whole id (ids are 36-rune UUIDs), else the only match. what names
// the ids in errors.
func byPrefix(prefix, what string, ids []string) (string, error) {
	var found []string
	for _, id := range ids {
		if id == prefix {
			return id, nil
		}
		if strings.HasPrefix(id, prefix) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("no %s starts with %q", what, prefix)
	}
	return "", fmt.Errorf("%q starts %d %ss (%s): give more of the id", prefix, len(found), what, strings.Join(found, ", "))
}

// wholeID says whether id is a whole UUID, not a prefix.
func wholeID(id string) bool { return len(id) == 36 }
