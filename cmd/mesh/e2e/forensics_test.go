package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// dumpConversation logs how conversation id is stored, as a process that
// ignores the bridge reads it: its head's message places and applied
// turns, and every record of its subject in the messages stream (orphans
// of failed saves included), each with its sequence, the record it
// chains to and its messages' ids. A check that finds a message twice
// calls it, so that the failure says whether the store holds the message
// twice or a read put it there.
func (m *meshProc) dumpConversation(t testing.TB, id string) {
	t.Helper()
	ctx := t.Context()
	js, err := jetstream.New(m.adminNATS(t))
	if err != nil {
		t.Logf("dump %s: %v", id, err)
		return
	}
	var b strings.Builder
	kv, err := js.KeyValue(ctx, mesh.DefaultNamespace().Bucket(mesh.BucketSessions))
	if err == nil {
		var e jetstream.KeyValueEntry
		if e, err = kv.Get(ctx, id); err == nil {
			var head struct {
				MessageCount int               `json:"message_count"`
				MessageTail  []json.RawMessage `json:"message_tail"`
				RecentTurns  []string          `json:"recent_turns"`
				Status       string            `json:"status"`
			}
			_ = json.Unmarshal(e.Value(), &head)
			fmt.Fprintf(&b, "head rev %d: status %s, %d messages, recent turns %v\n  tail:", e.Revision(), head.Status, head.MessageCount, head.RecentTurns)
			for _, p := range head.MessageTail {
				fmt.Fprintf(&b, " %s", p)
			}
			b.WriteString("\n")
		}
	}
	if err != nil {
		fmt.Fprintf(&b, "head: %v\n", err)
	}
	subject, err := mesh.DefaultNamespace().Messages(id)
	if err != nil {
		t.Logf("dump %s: %v", id, err)
		return
	}
	cons, err := js.OrderedConsumer(ctx, mesh.DefaultNamespace().Stream(mesh.StreamMessages), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Logf("dump %s: %v", id, err)
		return
	}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			break // no more records (or the server is gone: what was read is logged)
		}
		meta, _ := msg.Metadata()
		prev, rest, _ := bytes.Cut(msg.Data(), []byte("\n"))
		var ids []string
		for line := range bytes.SplitSeq(rest, []byte("\n")) {
			var one struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(line, &one) == nil {
				ids = append(ids, one.ID)
			}
		}
		var seq uint64
		var at time.Time
		if meta != nil {
			seq, at = meta.Sequence.Stream, meta.Timestamp
		}
		fmt.Fprintf(&b, "record %d (prev %s, %s): %v\n", seq, prev, at.Format("15:04:05.000"), ids)
		if meta != nil && meta.NumPending == 0 {
			break
		}
	}
	t.Logf("conversation %s as stored:\n%s", id, b.String())
}
