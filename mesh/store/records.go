package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/memory"
)

// recordCacheBytes bounds the records a process keeps (recordCache): about
// the newest records of a few hundred conversations of short messages. It
// counts their JSON: a record a history read also keeps its messages
// decoded (record.decoded), which the bound does not count (an agent's
// cache holds more than the bound says).
const recordCacheBytes = 2 << 20

// recordCache keeps the records this process appended or read, by stream
// sequence: a record is never edited, so the one at a sequence is the same
// for every reader, and a turn reads again mostly what the turn before
// wrote (the agent its history, the bridge its answer's page). The oldest
// kept go first once they add up to more than max bytes.
type recordCache struct {
	mu    sync.Mutex
	max   int
	size  int
	byseq map[uint64]cachedRecord
	order []uint64 // sequences in the order kept, oldest first
}

// cachedRecord is a record and the conversation whose subject holds it.
type cachedRecord struct {
	conv string
	rec  record
	size int
}

// newRecordCache makes a cache of maxBytes, emptied when the process gives
// its memory back (memory.Release: a quiet process need not keep the last
// burst's records).
func newRecordCache(maxBytes int) *recordCache {
	c := &recordCache{max: maxBytes, byseq: map[uint64]cachedRecord{}}
	memory.OnRelease(c, (*recordCache).reset)
	return c
}

// reset lets every record go.
func (c *recordCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byseq, c.order, c.size = map[uint64]cachedRecord{}, nil, 0
}

// get returns the record at seq if it is kept and is conv's.
func (c *recordCache) get(conv string, seq uint64) (record, bool) {
	if c == nil {
		return record{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byseq[seq]
	if !ok || r.conv != conv {
		return record{}, false
	}
	return r.rec, true
}

// put keeps r, a record of conv; one larger than a quarter of the cache
// is not kept.
func (c *recordCache) put(conv string, r record) {
	if c == nil {
		return
	}
	size := len(conv) + 64
	for _, m := range r.msgs {
		size += len(m) + 24
	}
	if size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byseq[r.seq]; ok {
		return
	}
	c.byseq[r.seq] = cachedRecord{conv: conv, rec: r, size: size}
	c.order = append(c.order, r.seq)
	c.size += size
	drop := 0
	for c.size > c.max && drop < len(c.order) {
		if old, ok := c.byseq[c.order[drop]]; ok {
			c.size -= old.size
			delete(c.byseq, c.order[drop])
		}
		drop++
	}
	if drop > 0 {
		// Copied once the dropped ones are most of its array, so that the
		// array does not grow without end.
		c.order = c.order[drop:]
		if cap(c.order) > 2*len(c.order)+64 {
			c.order = append([]uint64(nil), c.order...)
		}
	}
}

// decodedRecord is a record's messages, decoded the first time a history
// needed them; msgs is nil until then.
type decodedRecord struct {
	mu   sync.Mutex
	msgs []mesh.Message
}

// decoded appends r's messages from index from to out, decoded: the first
// call decodes them, later ones (the next turns of the conversation, read
// from the cache) reuse them. Each message appended is a copy whose tool
// calls and files are the caller's own (the tool calls' arguments are
// shared, as nothing edits them in place); snap gets the kept decoded
// message it copies, which nothing changes: the snapshot a save compares
// the messages read with.
func (r *record) decoded(conv string, from, to int, out []mesh.Message, snap []*mesh.Message) ([]mesh.Message, []*mesh.Message, error) {
	if r.dec == nil {
		r.dec = &decodedRecord{}
	}
	r.dec.mu.Lock()
	msgs := r.dec.msgs
	if msgs == nil {
		msgs = make([]mesh.Message, len(r.msgs))
		for i, data := range r.msgs {
			if err := json.Unmarshal(data, &msgs[i]); err != nil {
				r.dec.mu.Unlock()
				return nil, nil, fmt.Errorf("decode message in record %d of %s: %w", r.seq, conv, err)
			}
		}
		r.dec.msgs = msgs
	}
	r.dec.mu.Unlock()
	for i := from; i < to; i++ {
		m := msgs[i]
		m.ToolCalls, m.Files = slices.Clone(m.ToolCalls), slices.Clone(m.Files)
		out, snap = append(out, m), append(snap, &msgs[i])
	}
	return out, snap, nil
}

// decodedAt is the messages tail locates, oldest first, decoded (once per
// record this process keeps: record.decoded), and their snapshot.
func (l *MessageLog) decodedAt(ctx context.Context, src source, tail []mesh.MessageRef) ([]mesh.Message, []*mesh.Message, error) {
	seqs, counts := tailRecords(tail)
	recs, err := l.read(ctx, src, seqs)
	if err != nil {
		return nil, nil, err
	}
	// Room for a turn's messages: the run appends them without a copy.
	out, snap := make([]mesh.Message, 0, len(tail)+8), make([]*mesh.Message, 0, len(tail)+8)
	for i := range recs {
		r := &recs[i]
		end := src.end(*r)
		if end < counts[i] {
			return nil, nil, fmt.Errorf("read messages of %s: record %d holds %d messages, the head counts %d", src.conv, r.seq, end, counts[i])
		}
		if out, snap, err = r.decoded(src.conv, end-counts[i], end, out, snap); err != nil {
			return nil, nil, err
		}
	}
	return out, snap, nil
}

// Follow keeps every record appended to the log from now on in this
// process's cache, as the stream delivers it, until stop: a process that
// reads the records others append (the bridge answering a turn with the
// page its agent just saved) then finds them kept instead of asking the
// server for them, a round trip fewer on the way to its answer. A record
// it missed (the cache full, the consumer starting over) is read as
// before.
func (l *MessageLog) Follow(ctx context.Context) (stop func(), err error) {
	prefix := l.ns.Prefix() + ".msg."
	cc, err := FollowNew(ctx, l.js, l.stream, []string{l.ns.MessagesAll()}, func(m jetstream.Msg) {
		md, err := m.Metadata()
		conv, ok := strings.CutPrefix(m.Subject(), prefix)
		if err != nil || !ok {
			return
		}
		if r, err := parseRecord(md.Sequence.Stream, m.Data()); err == nil {
			l.cache.put(conv, r)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("follow messages: %w", err)
	}
	return cc.Stop, nil
}

// FollowMessages keeps the records other processes append in this
// process's cache as they are stored ([MessageLog.Follow]).
func (s *SessionStore) FollowMessages(ctx context.Context) (stop func(), err error) {
	return s.log.Follow(ctx)
}
