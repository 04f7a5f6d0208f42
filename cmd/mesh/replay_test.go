package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/replay"
)

func TestReadReplayFile(t *testing.T) {
	srcs, err := readReplayFile(strings.NewReader(`{"id":"a","messages":["one","two"]}

{"turns":[{"user":"list","answer":"none","calls":[{"tool":"resources/resources_list","arguments":{}}]}]}
`), "f.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 2 || srcs[0].ID != "a" || len(srcs[0].Turns) != 2 || srcs[0].Recorded {
		t.Errorf("first line: %+v", srcs[0])
	}
	if srcs[1].ID != "f.jsonl:3" || !srcs[1].Recorded || srcs[1].Turns[0].Calls[0].Tool != "resources/resources_list" {
		t.Errorf("third line: %+v", srcs[1])
	}
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", `{"messages":["a"]`, "f.jsonl:1"},
		{"an unknown field", `{"message":"a"}`, `unknown field "message"`},
		{"nothing to send", `{"id":"x"}`, "no messages and no turns"},
		{"both", `{"messages":["a"],"turns":[{"user":"b"}]}`, "not both"},
		{"an empty message", `{"messages":["a","  "]}`, "turn 1 has no user message"},
		{"a line too long", `{"messages":["` + strings.Repeat("x", maxReplayLine) + `"]}`, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readReplayFile(strings.NewReader(tc.in+"\n"), "f.jsonl")
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a usage error saying %q", err, tc.want)
			}
		})
	}
}

func TestReplayFlagsAreChecked(t *testing.T) {
	ok := func() *replayOptions {
		return &replayOptions{config: "new.yaml", concurrency: 4, rate: 5, turnTimeout: 1, thresholds: replay.NoThresholds()}
	}
	if err := ok().check([]string{"c1"}); err != nil {
		t.Fatalf("valid flags: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*replayOptions)
		ids  []string
	}{
		{"no configuration", func(o *replayOptions) { o.config = "" }, []string{"c1"}},
		{"no conversations", func(*replayOptions) {}, nil},
		{"two ways", func(o *replayOptions) { o.file = "f.jsonl" }, []string{"c1"}},
		{"concurrency 0", func(o *replayOptions) { o.concurrency = 0 }, []string{"c1"}},
		{"a negative rate", func(o *replayOptions) { o.rate = -1 }, []string{"c1"}},
		{"a ratio over 1", func(o *replayOptions) { o.thresholds.MaxChangedAnswers = 1.5 }, []string{"c1"}},
		{"a negative price", func(o *replayOptions) { o.priceIn = -1 }, []string{"c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok()
			tc.edit(o)
			if err := o.check(tc.ids); !errors.Is(err, errUsage) {
				t.Errorf("error %v, want a usage error", err)
			}
		})
	}
	if got := (&replayOptions{standIn: "declined"}).standInResult(); got != `{"not_run":"replay","result":"declined"}` {
		t.Errorf("a text stand-in: %s", got)
	}
	if got := (&replayOptions{standIn: `{"ok":false}`}).standInResult(); got != `{"ok":false}` {
		t.Errorf("a JSON stand-in: %s", got)
	}
	if exitCode(errThresholds) != exitThresholds {
		t.Errorf("thresholds exceeded: exit %d, want %d", exitCode(errThresholds), exitThresholds)
	}
}
