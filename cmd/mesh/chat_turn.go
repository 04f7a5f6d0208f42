package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
)

// eventsGrace is how long the chat waits for the events of a run whose
// POST already answered: the event stream may trail the answer a little.
const eventsGrace = 5 * time.Second

// turnWait is what one turn of the chat waits for.
type turnWait struct {
	// runs are the runs whose end ends the wait: the turn's (from its
	// run_queued event) and the resumes of the approvals decided (a resume's
	// run id is its approval's id). anyRun: the end of any run will do.
	runs   map[string]bool
	anyRun bool
	// decided are the approvals this turn decided or left pending.
	decided map[string]bool
	// posts are the answers of the message and decision POSTs (each waits
	// for the run it starts).
	posts  chan postResult
	grace  <-chan time.Time
	answer *runAnswer
	ctrlC  int
}

// postResult is the answer of a POST that starts a run.
type postResult struct {
	message  bool
	approval string
	answer   runAnswer
	err      error
}

// runAnswer is what the bridge answers a POST that starts a run.
type runAnswer struct {
	RunID    string         `json:"run_id"`
	Status   string         `json:"status"`
	Approval *mesh.Approval `json:"approval"`
	Result   *struct {
		RunID           string                 `json:"run_id"`
		WaitingApproval bool                   `json:"waiting_approval"`
		Approval        *mesh.PendingApproval  `json:"approval"`
		Approvals       []mesh.PendingApproval `json:"approvals"`
		ErrorCode       string                 `json:"error_code"`
	} `json:"result"`
}

// wait follows the events until the runs of w end, asking for the
// approvals they wait for on the way. Ctrl-C cancels the turn; a second
// one quits.
func (s *chatSession) wait(ctx context.Context, w *turnWait) error {
	if w.posts == nil {
		w.posts = make(chan postResult, 8)
	}
	for {
		select {
		case it := <-s.events:
			if it.err != nil {
				return it.err
			}
			s.show(it)
			done, err := s.onEvent(ctx, w, it.ev)
			if err != nil || done {
				return err
			}
		case r := <-w.posts:
			done, err := s.onPost(ctx, w, r)
			if err != nil || done {
				return err
			}
		case <-w.grace:
			// The run ended for the bridge, its last events did not come.
			w.grace = nil
			if res := w.answer.Result; res != nil && res.WaitingApproval {
				done, err := s.approve(ctx, w, pendingIDs(res.Approval, res.Approvals))
				if err != nil || done {
					return err
				}
				continue
			}
			return nil
		case sig := <-s.sigs:
			w.ctrlC++
			if sig == syscall.SIGTERM || w.ctrlC > 1 {
				s.out.endText()
				return errInterrupted
			}
			if s.interactive {
				s.out.endText()
				os.Stdout.WriteString("\r") // over the terminal's echo of ^C
			}
			s.note("%s", dim("[cancelling the turn: Ctrl-C again quits]"))
			go func() {
				if err := s.c.do(ctx, "POST", "/conversations/"+url.PathEscape(s.conv.ID)+"/cancel", nil, nil); err != nil {
					s.note("%s %v", red("[cancel failed]"), err)
				}
			}()
		}
	}
}

// onEvent notes what an event means for the wait; done ends it.
func (s *chatSession) onEvent(ctx context.Context, w *turnWait, ev mesh.Event) (bool, error) {
	switch ev.Type {
	case mesh.EventCustom:
		switch ev.Name {
		case mesh.CustomApprovalRequested:
			var ap mesh.Approval
			if customValue(ev, &ap) {
				s.seen[ap.UUID] = &ap
			}
		case mesh.CustomRunQueued:
			var v struct {
				RunID string `json:"runId"`
			}
			if customValue(ev, &v) && len(w.runs) == 0 {
				w.runs[v.RunID] = true
			}
		}
	case mesh.EventRunStarted:
		if ev.WrittenBy() == mesh.RunWrittenEnvelope {
			break
		}
		if w.runs != nil && len(w.runs) == 0 {
			w.runs[ev.RunID] = true // a turn queued before the stream opened
		}
	case mesh.EventRunFinished, mesh.EventRunError:
		if ev.WrittenBy() == mesh.RunWrittenEnvelope {
			break
		}
		s.finished[ev.RunID] = ev
		if w.anyRun || w.runs[ev.RunID] {
			return s.runEnded(ctx, w, ev)
		}
	}
	return false, nil
}

// runEnded handles the end of a run the wait follows: an interrupt asks
// for its approvals, anything else ends the turn.
func (s *chatSession) runEnded(ctx context.Context, w *turnWait, ev mesh.Event) (bool, error) {
	w.grace = nil
	if ev.Type == mesh.EventRunError {
		s.failed = true
		return true, nil
	}
	if ev.Outcome == nil || ev.Outcome.Type != mesh.OutcomeInterrupt {
		return true, nil
	}
	var ids []string
	for _, in := range ev.Outcome.Interrupts {
		ids = append(ids, in.ID)
	}
	if w.runs == nil {
		w.runs = map[string]bool{}
	}
	if w.decided == nil {
		w.decided = map[string]bool{}
	}
	w.anyRun = false
	return s.approve(ctx, w, ids)
}

// onPost handles the answer of a message or decision POST.
func (s *chatSession) onPost(ctx context.Context, w *turnWait, r postResult) (bool, error) {
	var api *apiError
	switch {
	case r.err == nil:
		w.answer = &r.answer
		if r.answer.Result != nil { // the run ended or paused for the bridge
			w.grace = time.After(eventsGrace)
		}
		return false, nil
	case r.message:
		s.note("%s %v", red("[not sent]"), r.err)
		s.failed = true
		return true, nil
	case errors.As(r.err, &api) && api.Status == http.StatusForbidden:
		s.note("%s", yellow("[your token may not decide: waiting for an approver (mesh approve yes|no "+r.approval+")]"))
		return false, nil
	case errors.As(r.err, &api) && api.Code == "approval_decided":
		var body struct {
			Approval *mesh.Approval `json:"approval"`
		}
		if json.Unmarshal(api.Body, &body) == nil && body.Approval != nil {
			s.note("%s", yellow("[already "+decidedText(body.Approval)+"]"))
		}
		if ev, ok := s.finished[r.approval]; ok {
			return s.runEnded(ctx, w, ev)
		}
		return false, nil
	default:
		s.note("%s %v", red("[decision failed]"), r.err)
		s.failed = true
		return true, nil
	}
}

// approve asks for each approval of ids not yet decided and sends the
// decisions; done is true when the person left one pending (the turn ends
// there).
func (s *chatSession) approve(ctx context.Context, w *turnWait, ids []string) (bool, error) {
	asked := false
	for _, id := range ids {
		if w.decided[id] {
			continue
		}
		w.decided[id] = true
		ap := s.seen[id]
		if ap == nil {
			var out struct {
				Approval *mesh.Approval `json:"approval"`
			}
			if err := s.c.do(ctx, "GET", "/approvals/"+url.PathEscape(id), nil, &out); err != nil || out.Approval == nil {
				s.note("%s %s: %v", red("[approval unreadable]"), id, err)
				continue
			}
			ap = out.Approval
			if s.jsonOut == nil {
				s.out.approval(ap)
			}
		}
		w.runs[id] = true // the resume runs under the approval's id
		if ap.Status != mesh.ApprovalPending {
			s.note("%s", yellow("["+decidedText(ap)+"]"))
			continue
		}
		approved, elsewhere, err := s.askWatching(ctx, id)
		if elsewhere != nil {
			// Decided on the web page, by `mesh approve` or over NATS
			// while the prompt was up: its approval_decided event says by
			// whom, and the resume is under way.
			continue
		}
		if err != nil {
			s.note("%s", yellow("[approval "+id+" left pending: mesh approve yes|no "+id+"]"))
			if errors.Is(err, errInterrupted) {
				return true, err
			}
			return true, nil
		}
		asked = true
		body := map[string]any{"approved": approved, "by": s.c.by, "args_hash": ap.ArgsHash}
		go func() {
			var answer runAnswer
			err := s.c.do(ctx, "POST", "/approvals/"+url.PathEscape(id), body, &answer)
			w.posts <- postResult{approval: id, answer: answer, err: err}
		}()
	}
	if !asked {
		// Nothing sent: the wait goes on only for a resume already under way.
		for id := range w.runs {
			if _, ok := s.finished[id]; !ok {
				return false, nil
			}
		}
		return true, nil
	}
	return false, nil
}

// askWatching asks y or n for approval id while it watches the approval:
// one decided elsewhere meanwhile ends the question, and is returned.
func (s *chatSession) askWatching(ctx context.Context, id string) (approved bool, elsewhere *mesh.Approval, err error) {
	if !s.interactive {
		// A pipe's next line is its answer, whatever happens elsewhere.
		approved, err = s.ask(id, nil)
		return approved, nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	var decided *mesh.Approval
	go func() {
		t := time.NewTicker(approvalWatchEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			var out struct {
				Approval *mesh.Approval `json:"approval"`
			}
			if s.c.do(wctx, "GET", "/approvals/"+url.PathEscape(id), nil, &out) == nil && out.Approval != nil && out.Approval.Status != mesh.ApprovalPending {
				decided = out.Approval
				close(stop)
				return
			}
		}
	}()
	approved, err = s.ask(id, stop)
	if errors.Is(err, errStopped) {
		return false, decided, nil
	}
	return approved, nil, err
}

// approvalWatchEvery is how often a chat's approval prompt reads the
// approval: a decision made elsewhere shows within about that.
const approvalWatchEvery = 500 * time.Millisecond

// ask reads y or n for approval id, until stop closes (errStopped).
func (s *chatSession) ask(id string, stop <-chan struct{}) (bool, error) {
	for {
		if !s.interactive {
			os.Stderr.WriteString("approve " + id + "? [y/n]\n")
		}
		line, err := s.in.ReadLineUntil("approve? [y/n] ", stop)
		if err != nil {
			return false, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
		s.note("answer y or n")
	}
}

// pendingIDs lists the ids of the approvals of a run's answer.
func pendingIDs(one *mesh.PendingApproval, all []mesh.PendingApproval) []string {
	var ids []string
	for _, p := range all {
		ids = append(ids, p.UUID)
	}
	if len(ids) == 0 && one != nil {
		ids = append(ids, one.UUID)
	}
	return ids
}
