package mesh

import "sync"

// recordCacheBytes bounds the records a process keeps (recordCache): about
// the newest records of a few hundred conversations of short messages.
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

func newRecordCache(maxBytes int) *recordCache {
	return &recordCache{max: maxBytes, byseq: map[uint64]cachedRecord{}}
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
