package agent

import (
	"context"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// saveAlertAfter is the count of failed tries in a row that raises the
// alert.
const saveAlertAfter = 3

// save applies change to the conversation by compare-and-set, from c as
// claimed. A save that fails (the write, not change's own refusal) is
// tried again after each pause of Config.SaveRetry, on the conversation
// read afresh: the run's outcome stays here meanwhile (change applies it
// again), and the work loop keeps the work item in progress. The third
// failure in a row raises an alert: CUSTOM session_save_failed on the
// mesh's system session, and mesh_session_save_alerts_total. When every
// try failed, the error leaves the item to its redelivery.
func (t *turn) save(ctx context.Context, c *mesh.Conversation, change func(*mesh.Conversation) error) (*mesh.Conversation, error) {
	pauses := t.a.cfg.SaveRetry
	if pauses == nil {
		pauses = config.DefaultSaveRetry()
	}
	for n := 1; ; n++ {
		out, err := t.trySave(ctx, n, c, change)
		if err == nil || !store.IsSaveFailure(err) {
			return out, err
		}
		c = nil // not to be used again: the next try reads it afresh
		t.log.Warn().Err(err).Int("failures", n).Msg("saving the conversation failed")
		if n == saveAlertAfter {
			t.alertSave(ctx, n, err)
		}
		if n > len(pauses) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pauses[n-1]):
		}
	}
}

func (t *turn) trySave(ctx context.Context, n int, c *mesh.Conversation, change func(*mesh.Conversation) error) (*mesh.Conversation, error) {
	if f := t.a.cfg.saveFault; f != nil {
		inner := change
		change = func(c *mesh.Conversation) error {
			if err := inner(c); err != nil {
				return err
			}
			if err := f(n); err != nil {
				return store.SaveFailure(err)
			}
			return nil
		}
	}
	if c != nil {
		return t.a.sessions.UpdateLoaded(ctx, c, change)
	}
	return t.a.sessions.Update(ctx, t.item.Session, change)
}

// alertSave publishes the alert of a conversation that failed to save n
// times in a row.
func (t *turn) alertSave(ctx context.Context, n int, err error) {
	telemetry.SessionSaveAlert()
	t.log.Error().Err(err).Int("failures", n).Msg("the conversation failed to save again and again: alert raised")
	value := map[string]any{"conversation": t.item.Session, "runId": t.runID(), "agent": t.a.name, "node": t.a.cfg.NodeID, "failures": n, "error": err.Error()}
	if _, perr := t.a.events.Publish(ctx, mesh.SystemSession, "", "", mesh.Custom(mesh.CustomSessionSaveFailed, value)); perr != nil {
		t.log.Warn().Err(perr).Msg("publish the alert of a failed save")
	}
}
