package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// endable is a bucket whose watches the test ends, as a reconnect ends
// them, and whose next openings it can make fail.
type endable struct {
	jetstream.KeyValue

	mu      sync.Mutex
	opened  int             // watches opened
	current *endableWatcher // the watch open now
	fail    int             // how many of the next openings fail
	tried   int             // openings asked for, failed ones included
}

func (k *endable) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tried++
	if k.fail > 0 {
		k.fail--
		return nil, errors.New("no responders")
	}
	inner, err := k.KeyValue.Watch(ctx, keys, opts...)
	if err != nil {
		return nil, err
	}
	w := &endableWatcher{inner: inner, updates: make(chan jetstream.KeyValueEntry), end: make(chan struct{})}
	go w.forward()
	k.opened++
	k.current = w
	return w, nil
}

// endWatch ends the watch open now.
func (k *endable) endWatch() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.current.endOnce.Do(func() { close(k.current.end) })
}

func (k *endable) counts() (opened, tried int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.opened, k.tried
}

// endableWatcher forwards a real watch's updates until it is ended.
type endableWatcher struct {
	inner   jetstream.KeyWatcher
	updates chan jetstream.KeyValueEntry
	end     chan struct{}
	endOnce sync.Once
}

func (w *endableWatcher) forward() {
	defer close(w.updates)
	defer func() { _ = w.inner.Stop() }()
	for {
		select {
		case <-w.end:
			return
		case e, ok := <-w.inner.Updates():
			if !ok {
				return
			}
			select {
			case w.updates <- e:
			case <-w.end:
				return
			}
		}
	}
}

func (w *endableWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }
func (w *endableWatcher) Stop() error {
	w.endOnce.Do(func() { close(w.end) })
	return nil
}

// seen records what a watch applied.
type seen struct {
	mu     sync.Mutex
	values map[string]string
	synced int
	errs   []error
}

func (s *seen) apply(e jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(s.values, e.Key())
		return
	}
	s.values[e.Key()] = string(e.Value())
}

func (s *seen) sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced++
}

func (s *seen) retrying(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *seen) value(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[key]
}

func (s *seen) syncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

func (s *seen) failures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs)
}

func TestWatchKVOpensAnEndedWatchAgain(t *testing.T) {
	m := meshtest.New(t)
	kv := &endable{KeyValue: m.Calls}
	if _, err := kv.Put(t.Context(), "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	s := &seen{values: map[string]string{}}
	ctx, cancel := context.WithCancel(t.Context())
	done, err := store.WatchKV(ctx, kv, store.KVWatch{Apply: s.apply, Synced: s.sync, Reopen: 10 * time.Millisecond, Retrying: s.retrying})
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return s.syncs() == 1 && s.value("a") == "1" }, "the first watch did not apply a=1 and sync")

	kv.endWatch()
	meshtest.Eventually(t, 5*time.Second, func() bool { opened, _ := kv.counts(); return opened == 2 }, "an ended watch was not opened again")
	meshtest.Eventually(t, 5*time.Second, func() bool { return s.syncs() == 2 }, "the reopened watch did not sync: %d syncs", s.syncs())
	if _, err := kv.Put(t.Context(), "b", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return s.value("b") == "2" && s.value("a") == "" }, "a put and a delete after the reopening were not applied")
	if n := s.failures(); n != 0 {
		t.Errorf("Retrying was told of %d failures, want 0", n)
	}

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch's goroutine did not end with its context")
	}
}

func TestWatchKVRetriesAnOpeningThatFails(t *testing.T) {
	m := meshtest.New(t)
	kv := &endable{KeyValue: m.Calls}
	s := &seen{values: map[string]string{}}
	_, err := store.WatchKV(t.Context(), kv, store.KVWatch{Apply: s.apply, Synced: s.sync, Reopen: 10 * time.Millisecond, Retry: 20 * time.Millisecond, Retrying: s.retrying})
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return s.syncs() == 1 }, "the first watch did not sync")

	kv.mu.Lock()
	kv.fail = 2
	kv.mu.Unlock()
	kv.endWatch()
	meshtest.Eventually(t, 5*time.Second, func() bool { return s.syncs() == 2 }, "the watch was not opened again after two failed openings")
	if opened, tried := kv.counts(); opened != 2 || tried != 4 {
		t.Errorf("opened %d watches in %d tries, want 2 in 4", opened, tried)
	}
	if n := s.failures(); n != 2 {
		t.Errorf("Retrying was told of %d failures, want 2", n)
	}
	if _, err := kv.Put(t.Context(), "c", []byte("3")); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return s.value("c") == "3" }, "a put after the reopening was not applied")
}

func TestWatchKVFirstOpening(t *testing.T) {
	tests := []struct {
		name       string
		keepTrying bool
		wantErr    bool
	}{
		{name: "returns its error", wantErr: true},
		{name: "is tried again with KeepTrying", keepTrying: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := meshtest.New(t)
			kv := &endable{KeyValue: m.Calls, fail: 1}
			s := &seen{values: map[string]string{}}
			_, err := store.WatchKV(t.Context(), kv, store.KVWatch{Apply: s.apply, Synced: s.sync, Reopen: 10 * time.Millisecond, KeepTrying: tt.keepTrying, Retrying: s.retrying})
			if (err != nil) != tt.wantErr {
				t.Fatalf("WatchKV error %v, want an error: %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			meshtest.Eventually(t, 5*time.Second, func() bool { return s.syncs() == 1 }, "the watch did not open after its first opening failed")
			if n := s.failures(); n != 1 {
				t.Errorf("Retrying was told of %d failures, want 1", n)
			}
		})
	}
}

func TestWatchKVWithoutReopenEndsWithItsWatch(t *testing.T) {
	m := meshtest.New(t)
	kv := &endable{KeyValue: m.Calls}
	s := &seen{values: map[string]string{}}
	done, err := store.WatchKV(t.Context(), kv, store.KVWatch{Apply: s.apply, Synced: s.sync, WaitSynced: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.syncs(); n != 1 {
		t.Fatalf("WatchKV returned before the watch synced (%d syncs), with WaitSynced", n)
	}
	kv.endWatch()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the goroutine did not end with its watch")
	}
	if opened, _ := kv.counts(); opened != 1 {
		t.Errorf("opened %d watches, want 1: Reopen is zero", opened)
	}
}

// A catalog watch whose first openings fail keeps trying (a role starting
// while the cluster elects leaders), and one opened again starts over: a
// tool deleted while no watch was open is gone from what fn gets.
func TestCatalogWatchKeepsTryingAndStartsOver(t *testing.T) {
	m := meshtest.New(t)
	kv := &endable{KeyValue: m.Tools, fail: 2}
	put := func(name string) {
		data, _ := json.Marshal(mesh.ToolEntry{Server: "srv", Name: name, ReadOnlyHint: true})
		if _, err := kv.Put(t.Context(), "srv."+name, data); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	put("b")
	var mu sync.Mutex
	var got string
	err := store.NewCatalog(kv).Watch(t.Context(), func(ts []mesh.ToolEntry) {
		var names []string
		for _, e := range ts {
			names = append(names, e.Name)
		}
		mu.Lock()
		got = strings.Join(names, ",")
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("a watch whose first openings fail: %v", err)
	}
	catalog := func() string { mu.Lock(); defer mu.Unlock(); return got }
	meshtest.Eventually(t, 10*time.Second, func() bool { return catalog() == "a,b" }, "the catalog never came: %q", catalog())

	// The watch ends; b is deleted before it opens again (the deletion
	// is not seen as an update), then c is put.
	kv.mu.Lock()
	kv.fail = 1
	kv.mu.Unlock()
	kv.endWatch()
	if err := m.Tools.Delete(t.Context(), "srv.b"); err != nil {
		t.Fatal(err)
	}
	put("c")
	meshtest.Eventually(t, 10*time.Second, func() bool { return catalog() == "a,c" }, "after the watch opened again, the catalog is %q, want a,c", catalog())
}
