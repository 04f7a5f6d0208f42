package core

import (
	"context"
	"errors"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// The models' budgets, as the bridge holds them: a message whose
// conversation, or whose conversation's owner today, has spent its budget
// is refused before it is queued (429 budget_exceeded), so no model is
// called. The counts come from what the bridge can trust: the
// conversation's usage, which only the agents' saves change, and the
// daily spend in mesh_usage, which only agents write.

// dailySpend is an owner's spend today, read once for all the tries of
// one compare-and-set.
type dailySpend struct {
	read  bool
	owner string
	tally limits.Tally
	err   error
}

// overBudget refuses a turn of cv when its conversation's budget, or its
// owner's daily one, is spent: [mesh.ErrBudgetExceeded], the daily one as
// a [LimitError] with its reset at the next UTC midnight. A daily spend
// that cannot be read lets the message through: a budget must not turn a
// blip into an outage.
func (c *Core) overBudget(ctx context.Context, cv *mesh.Conversation, d *dailySpend) error {
	b := c.cfg.Budgets
	if !b.Any() || cv.Direct {
		return nil
	}
	if err := b.CheckConversation(cv.ID, cv.Usage); err != nil {
		telemetry.LimitRefused(telemetry.LimitBudget)
		return err
	}
	if c.cfg.Spend == nil || !b.Daily() {
		return nil
	}
	now := c.now()
	if !d.read || d.owner != cv.Owner {
		*d = dailySpend{read: true, owner: cv.Owner}
		d.tally, d.err = c.cfg.Spend.Of(ctx, mesh.Day(now), cv.Owner)
	}
	if d.err != nil {
		c.log.Warn().Err(d.err).Msg("the daily spend could not be read; the message goes through")
		telemetry.LimitFailed()
		return nil
	}
	err := b.CheckDaily(cv.Owner, d.tally.Tokens, d.tally.Cost, now)
	var me *mesh.Error
	if !errors.As(err, &me) {
		return err
	}
	telemetry.LimitRefused(telemetry.LimitBudget)
	return &LimitError{Err: me, ResetAt: mesh.NextDay(now).Truncate(time.Second)}
}
