package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// RemoveOneByOne is the most messages of a subject that RemoveSubject
// deletes one at a time rather than purges. A purge makes the server
// recount the pending messages of every consumer of the stream, a walk of
// every subject the stream holds for a consumer with a wildcard (each
// watcher, each follower of events), with the stream held meanwhile; at
// tens of thousands of conversations that is milliseconds of every other
// request's time per purge. Deleting one message only lowers the counts of
// the consumers it matches.
const RemoveOneByOne = 1024

// RemoveSubject removes every message of st on subj, which may end in a
// wildcard: one at a time when there are at most RemoveOneByOne, the
// sequences read through an ordered consumer unless seqs gives them (all
// of subj's when its caller read them), else by a purge of the subject.
// What was stored on subj meanwhile, or could not be deleted, goes with a
// purge after all.
func RemoveSubject(ctx context.Context, st jetstream.Stream, subj string, seqs []uint64) error {
	total := uint64(len(seqs))
	if seqs == nil {
		var err error
		if total, err = subjectCount(ctx, st, subj); err != nil || total == 0 {
			return err
		}
	}
	if total > RemoveOneByOne {
		return purgeSubject(ctx, st, subj)
	}
	if seqs == nil {
		err := ReadSubject(ctx, st, subj, total, func(_ jetstream.Msg, md *jetstream.MsgMetadata) {
			seqs = append(seqs, md.Sequence.Stream)
		})
		if err != nil {
			return purgeSubject(ctx, st, subj)
		}
	}
	for _, seq := range seqs {
		if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return purgeSubject(ctx, st, subj)
		}
	}
	if left, err := subjectCount(ctx, st, subj); err != nil || left > 0 {
		return purgeSubject(ctx, st, subj)
	}
	return nil
}

// subjectCount is how many messages st holds on subj.
func subjectCount(ctx context.Context, st jetstream.Stream, subj string) (uint64, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", st.CachedInfo().Config.Name, err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	return total, nil
}

// purgeSubject purges the messages of st on subj.
func purgeSubject(ctx context.Context, st jetstream.Stream, subj string) error {
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("purge %s: %w", subj, err)
	}
	return nil
}
