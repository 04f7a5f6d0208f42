package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/replay"
)

// This file picks the conversations a replay runs: recorded ones by id,
// by creation time and agent, or the lines of a JSONL file.

// maxReplayLine bounds one line of a JSONL file of conversations.
const maxReplayLine = 4 << 20

// replayLine is one line of a JSONL file: a conversation's user messages
// (messages), or its recorded turns (turns: user, answer, calls), whose
// answers and calls the replay is compared with.
type replayLine struct {
	ID       string        `json:"id"`
	Messages []string      `json:"messages"`
	Turns    []replay.Turn `json:"turns"`
}

// sources are the conversations to replay, and a line saying how they
// were chosen.
func (r *replayRun) sources(ctx context.Context, ids []string) ([]replay.Source, string, error) {
	if r.o.file != "" {
		f, err := os.Open(r.o.file)
		if err != nil {
			return nil, "", usageErr("--file: %v", err)
		}
		defer f.Close()
		srcs, err := readReplayFile(f, r.o.file)
		if err != nil {
			return nil, "", err
		}
		if r.o.limit > 0 && len(srcs) > r.o.limit {
			srcs = srcs[:r.o.limit]
		}
		return srcs, fmt.Sprintf("%d conversations of %s", len(srcs), r.o.file), nil
	}
	if len(ids) == 0 {
		var err error
		if ids, err = r.selectRecorded(ctx); err != nil {
			return nil, "", err
		}
	}
	srcs := make([]replay.Source, 0, len(ids))
	for _, id := range ids {
		src, err := r.recorded(ctx, id)
		if err != nil {
			return nil, "", err
		}
		srcs = append(srcs, src)
	}
	return srcs, r.describeSelection(len(srcs)), nil
}

// describeSelection says which recorded conversations were chosen.
func (r *replayRun) describeSelection(n int) string {
	parts := []string{fmt.Sprintf("%d recorded conversations", n)}
	if r.o.agent != "" {
		parts = append(parts, "of agent "+r.o.agent)
	}
	if r.o.since != "" {
		parts = append(parts, "since "+r.o.since)
	}
	if r.o.until != "" {
		parts = append(parts, "until "+r.o.until)
	}
	return strings.Join(parts, " ")
}

// selectRecorded lists the conversations of --since, --until and --agent,
// oldest first, the newest --limit of them.
func (r *replayRun) selectRecorded(ctx context.Context) ([]string, error) {
	now := time.Now()
	since, err := parseWhen(r.o.since, now, "--since")
	if err != nil {
		return nil, err
	}
	until, err := parseWhen(r.o.until, now, "--until")
	if err != nil {
		return nil, err
	}
	all, err := r.sessions.Summaries(ctx)
	if err != nil {
		return nil, err
	}
	var picked []mesh.ConversationSummary
	for _, s := range all {
		switch {
		case s.DeletedAt != nil || s.Group != "" || s.MessageCount == 0:
		case r.o.agent != "" && s.Agent != r.o.agent:
		case !since.IsZero() && s.CreatedAt.Before(since), !until.IsZero() && !s.CreatedAt.Before(until):
		case strings.HasPrefix(s.Agent, "replay-"):
			// Another replay's conversation (kept with --keep).
		default:
			picked = append(picked, s)
		}
	}
	sort.Slice(picked, func(i, j int) bool {
		if !picked[i].CreatedAt.Equal(picked[j].CreatedAt) {
			return picked[i].CreatedAt.Before(picked[j].CreatedAt)
		}
		return picked[i].ID < picked[j].ID
	})
	if r.o.limit > 0 && len(picked) > r.o.limit {
		picked = picked[len(picked)-r.o.limit:]
	}
	ids := make([]string, len(picked))
	for i, s := range picked {
		ids[i] = s.ID
	}
	return ids, nil
}

// parseWhen reads a time: RFC 3339, or a duration back from now.
func parseWhen(s string, now time.Time, flag string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usageErr("%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (168h)", flag, s)
}

// recorded reads conversation id whole and splits it into its turns.
func (r *replayRun) recorded(ctx context.Context, id string) (replay.Source, error) {
	if !wholeID(id) {
		var err error
		if id, err = sessionByPrefix(ctx, r.sessions, id); err != nil {
			return replay.Source{}, err
		}
	}
	head, msgs, err := r.sessions.AllMessages(ctx, id)
	if err != nil {
		return replay.Source{}, fmt.Errorf("conversation %s: %w", id, err)
	}
	switch {
	case head.Group != nil:
		return replay.Source{}, fmt.Errorf("conversation %s is a group chat: a replay runs one agent's conversations", id)
	case head.Direct:
		return replay.Source{}, fmt.Errorf("conversation %s holds direct tool calls, which no model makes: nothing to replay", id)
	case head.Replay != "":
		return replay.Source{}, fmt.Errorf("conversation %s is itself a replay's (%s)", id, head.Replay)
	}
	return replay.Source{ID: id, Agent: head.Agent, Turns: replay.TurnsOf(msgs), Recorded: true}, nil
}

// readReplayFile reads a JSONL file of conversations (name names it in
// errors): one JSON object a line, blank lines skipped.
func readReplayFile(in io.Reader, name string) ([]replay.Source, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxReplayLine)
	var out []replay.Source
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l replayLine
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, usageErr("%s:%d: %v (a line is {\"id\", \"messages\": [\"…\"]} or {\"id\", \"turns\": [{\"user\", \"answer\", \"calls\"}]})", name, n, err)
		}
		src := replay.Source{ID: l.ID}
		if src.ID == "" {
			src.ID = fmt.Sprintf("%s:%d", name, n)
		}
		switch {
		case len(l.Messages) > 0 && len(l.Turns) > 0:
			return nil, usageErr("%s:%d: give messages or turns, not both", name, n)
		case len(l.Messages) > 0:
			for _, m := range l.Messages {
				src.Turns = append(src.Turns, replay.Turn{User: m})
			}
		case len(l.Turns) > 0:
			src.Turns, src.Recorded = l.Turns, true
		default:
			return nil, usageErr("%s:%d: no messages and no turns", name, n)
		}
		for i, t := range src.Turns {
			if strings.TrimSpace(t.User) == "" {
				return nil, usageErr("%s:%d: turn %d has no user message", name, n, i)
			}
		}
		out = append(out, src)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, usageErr("%s: a line is longer than %d bytes", name, maxReplayLine)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
