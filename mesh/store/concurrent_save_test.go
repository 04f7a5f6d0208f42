package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// Three processes (each its own connection and record cache) run every
// turn of one conversation at once, as copies of a work item do: claim,
// then settle, each save under a deadline of a few milliseconds, so that
// many fail with an outcome unknown (written, or not) and are tried again
// from a fresh read. Each message is stored once, and the pages read them
// back once.
func TestConcurrentSavesWithUnknownOutcomesStoreEachMessageOnce(t *testing.T) {
	first, js := testStore(t)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Messages: []mesh.Message{{ID: "system", Role: mesh.RoleSystem, Content: "prompt"}}}
	if err := first.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	stores := []*SessionStore{first}
	for range 2 {
		nc, err := nats.Connect(js.Conn().ConnectedUrl())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		pjs, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := pjs.KeyValue(ctx, first.kv.Bucket())
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, NewSessionStore(kv, NewMessageLog(pjs, mesh.DefaultNamespace())))
	}
	var mu sync.Mutex
	failed := 0
	// try runs op under a deadline of 0-4 ms until it succeeds.
	try := func(op func(ctx context.Context) error) {
		for {
			octx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(4000))*time.Microsecond)
			err := op(octx)
			cancel()
			if err == nil {
				return
			}
			mu.Lock()
			failed++
			mu.Unlock()
		}
	}
	errBusy := errors.New("another turn holds the conversation")
	turn := func(s *SessionStore, id string) {
		claimed := false
		try(func(ctx context.Context) error {
			_, err := s.Update(ctx, c.ID, func(cv *mesh.Conversation) error {
				claimed = false
				switch {
				case cv.HasTurn(id):
					return ErrNoChange
				case cv.Turn != nil && cv.Turn.ID != id:
					return errBusy
				case !cv.HasMessage(id):
					cv.Messages = append(cv.Messages, mesh.Message{ID: id, Role: mesh.RoleUser, Content: "list all resources"})
				}
				cv.Turn, claimed = &mesh.Turn{ID: id}, true
				return nil
			})
			return err
		})
		if !claimed {
			return
		}
		try(func(ctx context.Context) error {
			_, err := s.Update(ctx, c.ID, func(cv *mesh.Conversation) error {
				if cv.Turn == nil || cv.Turn.ID != id {
					return ErrNoChange
				}
				for _, m := range []string{id + "-a1", id + "-result", id + "-a2"} {
					if !cv.HasMessage(m) {
						cv.Messages = append(cv.Messages, mesh.Message{ID: m, Role: mesh.RoleAssistant, Content: "answer"})
					}
				}
				cv.MarkTurn(id)
				cv.Turn = nil
				return nil
			})
			return err
		})
	}
	const turns = 60
	for k := range turns {
		var wg sync.WaitGroup
		for _, s := range stores {
			wg.Go(func() { turn(s, fmt.Sprintf("turn-%d", k)) })
		}
		wg.Wait()
	}
	if failed == 0 {
		t.Fatal("no save failed: the deadlines did not bite")
	}
	seen, total := map[string]int{}, 0
	for before := ""; ; {
		page, err := first.GetPage(ctx, c.ID, 200, before)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Messages {
			var m mesh.Message
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			seen[m.ID]++
			total++
		}
		if before = page.Before; before == "" {
			break
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("message %s stored %d times", id, n)
		}
	}
	if total != 1+4*turns {
		t.Errorf("%d messages, want %d (%d failed saves)", total, 1+4*turns, failed)
	}
}
