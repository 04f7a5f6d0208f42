package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// queues reads the work queue of every agent and group: the stream's
// count of items per subject (mesh.work.<role>.<name>.<session>), summed
// by role and name, and the state of each durable consumer (CONSUMER.LIST
// of MESH_WORK, no message read). A queue without a consumer (its agent
// never ran) shows its items all pending; one with a consumer and no item
// shows zeros.
func (s *Service) queues(ctx context.Context) ([]Queue, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	work := s.res.Work
	if work == nil {
		return []Queue{}, fmt.Errorf("the work stream is not bound")
	}
	byName := map[string]*Queue{}
	get := func(role, name string) *Queue {
		k := role + "." + name
		q := byName[k]
		if q == nil {
			q = &Queue{Role: role, Name: name}
			byName[k] = q
		}
		return q
	}
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(s.res.NS.WorkAll()))
	if err != nil {
		return []Queue{}, fmt.Errorf("work stream: %w", err)
	}
	prefix := s.res.NS.Prefix() + ".work."
	for subj, n := range info.State.Subjects {
		role, name, ok := workName(subj, prefix)
		if ok {
			get(role, name).Messages += n
		}
	}
	lister := work.ListConsumers(ctx)
	seen := map[*Queue]bool{}
	for ci := range lister.Info() {
		role, name, ok := workName(ci.Config.FilterSubject, prefix)
		if !ok {
			continue
		}
		q := get(role, name)
		q.Consumer = ci.Name
		q.Pending, q.Working, q.Redelivered, q.Pulling = ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting
		seen[q] = true
	}
	for _, q := range byName {
		if !seen[q] {
			q.Pending = q.Messages
		}
	}
	out := make([]Queue, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
		telemetry.SetWorkPending(q.Role+"_"+q.Name, q.Pending)
	}
	slices.SortFunc(out, func(a, b Queue) int { return cmp.Or(strings.Compare(a.Role, b.Role), strings.Compare(a.Name, b.Name)) })
	if err := lister.Err(); err != nil {
		return out, fmt.Errorf("work consumers: %w", err)
	}
	return out, nil
}

// workName reads role and name of a work subject or filter,
// <prefix>.work.<role>.<name>.<session or *>.
func workName(subject, prefix string) (role, name string, ok bool) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return "", "", false
	}
	return parts[0], parts[1], true
}
