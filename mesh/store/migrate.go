package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// This file brings over what a release before 0.1.0 stored in a form this
// one does not read as it is.

// legacyWorkFilter matches the work items a release before 0.1.0 queued:
// mesh.work.<role>.<name>, without the conversation token this release's
// consumers filter on (mesh.work.<role>.<name>.*).
func legacyWorkFilter(ns mesh.Namespace) string { return ns.Prefix() + ".work.*.*" }

// LegacyWork counts the work items queued by a release before 0.1.0 that
// are still in the work stream, by subject.
func LegacyWork(ctx context.Context, ns mesh.Namespace, work jetstream.Stream) (map[string]uint64, error) {
	info, err := work.Info(ctx, jetstream.WithSubjectFilter(legacyWorkFilter(ns)))
	if err != nil {
		return nil, fmt.Errorf("work stream: %w", err)
	}
	return info.State.Subjects, nil
}

// MoveLegacyWork moves every work item a release before 0.1.0 queued to
// the subject this release's consumers read, mesh.work.<role>.<name>.
// <session>, with its headers, in order, and deletes the old copy once the
// new one is stored: a turn, resume or group message queued before an
// upgrade runs after it. Provisioning runs it; it is idempotent, and two
// runs at once store each item once (the copy's message id is the old
// item's sequence). An item whose body names no valid conversation is left
// where it is and counted in skipped.
func MoveLegacyWork(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace, work jetstream.Stream) (moved, skipped int, err error) {
	subjects, err := LegacyWork(ctx, ns, work)
	if err != nil || len(subjects) == 0 {
		return 0, 0, err
	}
	for subject := range subjects {
		for seq := uint64(1); ; {
			msg, err := work.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return moved, skipped, fmt.Errorf("read work item %s after %d: %w", subject, seq, err)
			}
			seq = msg.Sequence + 1
			var item mesh.WorkItem
			if json.Unmarshal(msg.Data, &item) != nil || mesh.CheckToken(item.Session) != nil {
				skipped++
				continue
			}
			out := nats.NewMsg(subject + "." + item.Session)
			out.Data = msg.Data
			for k, v := range msg.Header {
				out.Header[k] = v
			}
			// The old item's own message id is within the duplicate window
			// when it was queued just now: the copy would be dropped as it.
			out.Header.Set(jetstream.MsgIDHeader, "moved:"+strconv.FormatUint(msg.Sequence, 10))
			if _, err := js.PublishMsg(ctx, out); err != nil {
				return moved, skipped, fmt.Errorf("move work item %d of %s: %w", msg.Sequence, subject, err)
			}
			if err := work.DeleteMsg(ctx, msg.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return moved, skipped, fmt.Errorf("delete moved work item %d of %s: %w", msg.Sequence, subject, err)
			}
			moved++
		}
	}
	return moved, skipped, nil
}
