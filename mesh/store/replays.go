package store

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// MaxReportBytes bounds a stored replay report: under the 1 MiB max
// payload of a plain nats-server, with room for the message's headers.
const MaxReportBytes = 1000 << 10

// ReplayStore holds the reports of replays in mesh_replays, one key per
// run id. A report is written once by its replay and read by the bridge.
type ReplayStore struct{ kv jetstream.KeyValue }

// NewReplayStore reads and writes reports in kv.
func NewReplayStore(kv jetstream.KeyValue) *ReplayStore { return &ReplayStore{kv: kv} }

// Put stores the report of run id (its JSON); a second report of one id is
// refused.
func (s *ReplayStore) Put(ctx context.Context, id string, report []byte) error {
	if err := mesh.CheckID(id); err != nil {
		return err
	}
	if len(report) > MaxReportBytes {
		return fmt.Errorf("replay report %s: %d bytes, more than %d", id, len(report), MaxReportBytes)
	}
	if _, err := s.kv.Create(ctx, id, report); err != nil {
		return fmt.Errorf("store replay report %s: %w", id, err)
	}
	return nil
}

// Get is the report of run id, as stored.
func (s *ReplayStore) Get(ctx context.Context, id string) ([]byte, error) {
	if mesh.CheckID(id) != nil {
		return nil, mesh.ErrReplayNotFound.With(fmt.Sprintf("replay %s not found", mesh.Clip(id)))
	}
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, mesh.ErrReplayNotFound.With(fmt.Sprintf("replay %s not found", id))
	}
	if err != nil {
		return nil, fmt.Errorf("read replay report %s: %w", id, err)
	}
	return e.Value(), nil
}

// List is every stored report, in key order.
func (s *ReplayStore) List(ctx context.Context) ([][]byte, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list replay reports: %w", err)
	}
	var ids []string
	for k := range keys.Keys() {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	out := make([][]byte, 0, len(ids))
	for _, id := range ids {
		v, err := s.Get(ctx, id)
		if errors.Is(err, mesh.ErrReplayNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
