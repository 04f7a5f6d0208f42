package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentmesh/agentmesh/mesh"
)

// mesh chat talks to the bridge's HTTP API with the user's token, not to
// NATS with the admin's: the conversation is the token's principal's, and
// an approval decided here records that principal (the bridge's rules hold).

const chatLong = `Chat with the mesh's agent (or a group chat) in the terminal.

Answers stream as they are written; tool calls and their results show on a
line each; a destructive call shows its tool and arguments and asks
"approve? [y/n]" (deciding needs a token with the approver or admin role;
without one the chat waits for an approver's decision). Ctrl-C cancels the
running turn, a second Ctrl-C (or one at a prompt) quits with exit code 130;
Ctrl-D or /quit at the prompt quits with 0. With CONVERSATION the chat resumes it and prints its history.

In a pipe (stdin not a terminal) it reads one message per line and prints
the answers; the line after an approval request answers it (y or n). The
conversation's id goes to stderr. --json prints the AG-UI events, one JSON
object per line, instead of text.

It talks to the bridge (--url, $MESH_URL, else agent.yaml's address) with the
bearer token of $MESH_TOKEN or --token-file.`

func chatCommand(o *clientOptions) *cobra.Command {
	var agent, group string
	cmd := &cobra.Command{
		Use:   "chat [--agent NAME | --group NAME] [CONVERSATION]",
		Short: "chat with the agent or a group chat: streamed answers, approvals, Ctrl-C cancels",
		Long:  chatLong,
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent != "" && group != "" {
				return usageErr("--agent and --group exclude each other")
			}
			if len(args) == 1 && (agent != "" || group != "") {
				return usageErr("--agent and --group start a new conversation; CONVERSATION resumes one")
			}
			c, err := o.bridge()
			if err != nil {
				return err
			}
			conv := ""
			if len(args) == 1 {
				conv = args[0]
			}
			return runChat(c, conv, agent, group, o.json)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the agent to chat with: the one the bridge serves (it is checked)")
	cmd.Flags().StringVar(&group, "group", "", "start a chat of this group (GET /groups lists them)")
	o.httpFlags(cmd)
	o.jsonFlag(cmd)
	return cmd
}

// chatSession is one `mesh chat`: a conversation, its event stream, the
// terminal or pipe it reads from, and the signals it owns.
type chatSession struct {
	c       *bridgeClient
	conv    *mesh.Conversation
	out     *chatPrinter
	jsonOut io.Writer
	in      lineReader
	sigs    chan os.Signal
	events  chan streamItem
	// seen holds the approvals requested on the stream, finished the
	// run ends seen, by run id.
	seen     map[string]*mesh.Approval
	finished map[string]mesh.Event
	failed   bool
	// interactive: a person at a terminal, not a pipe.
	interactive bool
}

// streamItem is one event of the conversation's stream, or why it broke.
type streamItem struct {
	ev  mesh.Event
	raw []byte
	err error
}

func runChat(c *bridgeClient, convID, agent, group string, jsonOut bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &chatSession{
		c: c, sigs: make(chan os.Signal, 4), events: make(chan streamItem, 256),
		seen: map[string]*mesh.Approval{}, finished: map[string]mesh.Event{},
		interactive: term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd())) && !jsonOut,
	}
	// Ctrl-C is ours: it cancels a turn (see wait), it does not kill us.
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(s.sigs)
	if err := s.open(ctx, convID, agent, group); err != nil {
		return err
	}
	name := s.conv.Agent
	if s.conv.Group != nil {
		name = s.conv.Group.Name
	}
	s.out = newChatPrinter(os.Stdout, name)
	if jsonOut {
		s.jsonOut = os.Stdout
	}
	stream, err := c.events(ctx, s.conv.ID, "now")
	if err != nil {
		return err
	}
	go s.follow(ctx, stream)
	if s.interactive {
		s.in = newTTYReader()
		fmt.Fprintf(os.Stdout, "%s %s with %s %s\n", dim("conversation"), s.conv.ID, bold(name), dim("(Ctrl-C cancels a turn, Ctrl-D quits)"))
	} else {
		s.in = newPipeReader(os.Stdin, s.sigs)
		fmt.Fprintf(os.Stderr, "conversation %s\n", s.conv.ID)
	}
	if convID != "" && !jsonOut {
		s.out.history(s.conv)
	}
	if err := s.resume(ctx); err != nil {
		return err
	}
	for {
		line, err := s.in.ReadLine("you> ")
		if errors.Is(err, errInterrupted) {
			return err
		}
		if err != nil {
			break // Ctrl-D, the end of the pipe
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return nil
		}
		if err := s.turn(ctx, line); err != nil {
			return err
		}
	}
	if s.failed && !s.interactive {
		return errQuiet
	}
	return nil
}

// open resumes conversation id, or creates one (of group, when named).
func (s *chatSession) open(ctx context.Context, id, agent, group string) error {
	if id != "" {
		var out struct {
			Conversation *mesh.Conversation `json:"conversation"`
		}
		if err := s.c.do(ctx, "GET", "/conversations/"+url.PathEscape(id), nil, &out); err != nil {
			return err
		}
		s.conv = out.Conversation
		return nil
	}
	if agent != "" {
		// The bridge serves one agent (agent.yaml's name): say so rather
		// than chat with another than the one asked for.
		var card struct {
			Name string `json:"name"`
		}
		if err := s.c.do(ctx, "GET", "/.well-known/agent-card.json", nil, &card); err != nil {
			return err
		}
		if card.Name != agent {
			return usageErr("the bridge at %s serves the agent %q, not %q", s.c.base, card.Name, agent)
		}
	}
	body := map[string]any{}
	if group != "" {
		body["group"] = group
	}
	var out struct {
		Conversation *mesh.Conversation `json:"conversation"`
	}
	if err := s.c.do(ctx, "POST", "/conversations", body, &out); err != nil {
		return err
	}
	s.conv = out.Conversation
	return nil
}

// follow reads the conversation's events into s.events, reconnecting
// after the last event it got when the stream breaks.
func (s *chatSession) follow(ctx context.Context, stream *sseStream) {
	after := "now"
	for {
		for {
			ev, err := stream.Next()
			if err != nil {
				break
			}
			if ev.ID != "" {
				after = ev.ID
			}
			var e mesh.Event
			if json.Unmarshal(ev.Data, &e) != nil {
				continue
			}
			select {
			case s.events <- streamItem{ev: e, raw: ev.Data}:
			case <-ctx.Done():
				stream.Close()
				return
			}
		}
		stream.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			var err error
			if stream, err = s.c.events(ctx, s.conv.ID, after); err == nil {
				break
			}
			var api *apiError
			if errors.As(err, &api) && api.Status/100 == 4 {
				select {
				case s.events <- streamItem{err: err}:
				case <-ctx.Done():
				}
				return
			}
		}
	}
}

// show prints an event: as text, or its JSON line with --json.
func (s *chatSession) show(it streamItem) {
	if s.jsonOut != nil {
		fmt.Fprintf(s.jsonOut, "%s\n", it.raw)
		return
	}
	s.out.event(it.ev)
}

// note tells the person something: on stdout in a terminal, on stderr in a
// pipe or with --json, so that stdout keeps only the answers.
func (s *chatSession) note(format string, args ...any) {
	if s.interactive {
		s.out.line(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// resume finishes what a resumed conversation was doing: a turn that runs,
// or approvals that wait.
func (s *chatSession) resume(ctx context.Context) error {
	switch s.conv.Status {
	case mesh.StatusRunning, mesh.StatusQueued:
		s.note("%s", dim("[a turn is running: following it]"))
		return s.wait(ctx, &turnWait{anyRun: true})
	case mesh.StatusWaitingApproval:
		ids := pendingIDs(s.conv.PendingApproval, s.conv.PendingApprovals)
		w := &turnWait{runs: map[string]bool{}, decided: map[string]bool{}, posts: make(chan postResult, 8)}
		if done, err := s.approve(ctx, w, ids); err != nil || done {
			return err
		}
		return s.wait(ctx, w)
	}
	return nil
}

// turn sends one message and follows its run to the end, deciding the
// approvals it asks for on the way.
func (s *chatSession) turn(ctx context.Context, text string) error {
	w := &turnWait{runs: map[string]bool{}, decided: map[string]bool{}, posts: make(chan postResult, 8)}
	go func() {
		var answer runAnswer
		err := s.c.do(ctx, "POST", "/conversations/"+url.PathEscape(s.conv.ID)+"/messages", map[string]any{"message": text}, &answer)
		w.posts <- postResult{message: true, answer: answer, err: err}
	}()
	return s.wait(ctx, w)
}

// lineReader reads what the person types, or the next line of a pipe.
// ReadLineUntil gives up when stop closes (nil: never), with errStopped;
// a line half typed then is dropped.
type lineReader interface {
	ReadLine(prompt string) (string, error)
	ReadLineUntil(prompt string, stop <-chan struct{}) (string, error)
}

// errStopped ends a read whose question was answered elsewhere.
var errStopped = errors.New("stopped")

// ttyReader edits lines on a terminal (golang.org/x/term: history, arrows,
// Ctrl-A/E …), in raw mode only while it reads, so that Ctrl-C during a
// turn is a signal.
type ttyReader struct {
	fd int
	t  *term.Terminal
	in *ctrlCReader
}

func newTTYReader() *ttyReader {
	in := newCtrlCReader(os.Stdin)
	rw := struct {
		io.Reader
		io.Writer
	}{in, os.Stdout}
	return &ttyReader{fd: int(os.Stdin.Fd()), t: term.NewTerminal(rw, ""), in: in}
}

// ctrlCReader notes a Ctrl-C typed in raw mode, which x/term's ReadLine
// reports as io.EOF like Ctrl-D: Ctrl-C quits with 130, Ctrl-D with 0.
// One goroutine reads the terminal, so that a read can be given up (stop)
// without losing what is typed next.
type ctrlCReader struct {
	chunks chan []byte
	end    chan error
	rest   []byte
	ctrlC  bool
	stop   <-chan struct{}
	// stopped says the last read ended for stop, not for the person.
	stopped bool
}

func newCtrlCReader(r io.Reader) *ctrlCReader {
	c := &ctrlCReader{chunks: make(chan []byte), end: make(chan error, 1)}
	go func() {
		for {
			buf := make([]byte, 256)
			n, err := r.Read(buf)
			if n > 0 {
				c.chunks <- buf[:n]
			}
			if err != nil {
				c.end <- err
				return
			}
		}
	}()
	return c
}

func (c *ctrlCReader) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		select {
		case c.rest = <-c.chunks:
		case err := <-c.end:
			c.end <- err // every later read ends too
			return 0, err
		case <-c.stop:
			// An Enter ends the line as x/term knows lines to end (its
			// cursor back at the start, for the next prompt); the reader
			// drops that line.
			c.stopped = true
			c.stop = nil
			return copy(p, "\r"), nil
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	if bytes.IndexByte(p[:n], 3) >= 0 {
		c.ctrlC = true
	}
	return n, nil
}

func (r *ttyReader) ReadLine(prompt string) (string, error) {
	return r.ReadLineUntil(prompt, nil)
}

func (r *ttyReader) ReadLineUntil(prompt string, stop <-chan struct{}) (string, error) {
	state, err := term.MakeRaw(r.fd)
	if err != nil {
		return "", err
	}
	defer func() { _ = term.Restore(r.fd, state) }()
	if w, h, err := term.GetSize(r.fd); err == nil {
		_ = r.t.SetSize(w, h)
	}
	r.t.SetPrompt(bold(prompt))
	r.in.ctrlC, r.in.stop, r.in.stopped = false, stop, false
	line, err := r.t.ReadLine()
	r.in.stop = nil
	switch {
	case r.in.stopped:
		return "", errStopped
	case errors.Is(err, io.EOF) && r.in.ctrlC:
		return "", errInterrupted
	}
	return line, err
}

// pipeReader reads lines of a pipe; a signal while it waits quits.
type pipeReader struct {
	lines chan pipeLine
	sigs  chan os.Signal
	end   error
}

type pipeLine struct {
	text string
	err  error
}

func newPipeReader(in io.Reader, sigs chan os.Signal) *pipeReader {
	r := &pipeReader{lines: make(chan pipeLine), sigs: sigs}
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			r.lines <- pipeLine{text: sc.Text()}
		}
		err := sc.Err()
		if err == nil {
			err = io.EOF
		}
		r.lines <- pipeLine{err: err}
	}()
	return r
}

func (r *pipeReader) ReadLine(prompt string) (string, error) {
	return r.ReadLineUntil(prompt, nil)
}

func (r *pipeReader) ReadLineUntil(_ string, stop <-chan struct{}) (string, error) {
	if r.end != nil {
		return "", r.end
	}
	select {
	case l := <-r.lines:
		r.end = l.err
		return l.text, l.err
	case <-r.sigs:
		return "", errInterrupted
	case <-stop:
		return "", errStopped
	}
}
