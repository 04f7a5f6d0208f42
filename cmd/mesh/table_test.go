package main

import (
	"strings"
	"testing"
)

// At a terminal a table fits its width: ids cut to 8 runes, the last
// column cut with "…"; in a pipe every cell is whole.
func TestTableFitsTheTerminal(t *testing.T) {
	build := func() *table {
		tb := newTable("ID", "STATUS", "TITLE").idColumns(0)
		tb.add("5eceb4ca-adaa-4433-9d7a-9a0c3e307d88", "waiting_approval", "add resource web-2 with value 7 and then some more words")
		tb.add("e70877e9-b68b-4a27-a42c-3a3e94ead7c7", "active", "short")
		return tb
	}
	var b strings.Builder
	if err := build().print(&b, 48); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if n := len([]rune(line)); n > 48 {
			t.Errorf("line of %d runes at a width of 48: %q", n, line)
		}
	}
	want := "ID        STATUS            TITLE\n" +
		"5eceb4ca  waiting_approval  add resource web-2 …\n" +
		"e70877e9  active            short\n"
	if b.String() != want {
		t.Errorf("at 48 columns:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := build().print(&b, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "5eceb4ca-adaa-4433-9d7a-9a0c3e307d88") || !strings.Contains(b.String(), "then some more words") {
		t.Errorf("in a pipe a cell was cut:\n%s", b.String())
	}
}

func TestByPrefix(t *testing.T) {
	ids := []string{"5eceb4ca-adaa-4433-9d7a-9a0c3e307d88", "5eceb4cb-0000-4433-9d7a-9a0c3e307d88", "e70877e9-b68b-4a27-a42c-3a3e94ead7c7"}
	if got, err := byPrefix("e708", "approval", ids); err != nil || got != ids[2] {
		t.Errorf("e708: %q %v", got, err)
	}
	if _, err := byPrefix("5eceb4c", "approval", ids); err == nil || !strings.Contains(err.Error(), "give more of the id") {
		t.Errorf("an ambiguous prefix: %v", err)
	}
	if _, err := byPrefix("ff", "approval", ids); err == nil || !strings.Contains(err.Error(), `no approval starts with "ff"`) {
		t.Errorf("no match: %v", err)
	}
}
