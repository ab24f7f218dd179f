package ops

import (
	"context"
	"fmt"

	"github.com/tessera-dev/tessera/internal/core"
)

type queueSettingsIn struct {
	queueRef
	core.QueueSettingsParams
}

type groupSettingsIn struct {
	queueRef
	core.GroupSettingsParams
}

// fleetOps are a queue's fleet view and settings (issue 31): the claims
// themselves are claimOps, with capabilities.
var fleetOps = []*Op{
	op(Op{Name: core.ActQueueFleet, Summary: "A queue's fleet: settings, groups, lanes (ready by group and requires, unmatched ones) and the capabilities seen claiming",
		Description: fmt.Sprintf("Read a queue's fleet view: its group_max_running and rate; its groups (cap, rate, cooldown, live leases, last grant); "+
			"its lanes — ready tasks by group and requires — with unmatched: true when no claimant seen in the last %d minutes could take them (unmatched_seconds says for how long); "+
			"and the capability sets claimants showed.", int(core.UnmatchedAfter.Minutes())),
		HTTP: &Route{Method: "GET", Path: "/v1/queues/{queue}/fleet", Namespaced: true},
		Tool: &Tool{Name: "queue_fleet", Title: "Read a queue's fleet", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *queueRef) (*core.Fleet, error) {
			return c.core.QueueFleet(ctx, c.Actor, c.NS, in.Queue)
		}),
	op(Op{Name: core.ActQueueSettings, Summary: "Set a queue's group_max_running and rate",
		Description: "Replace a queue's fleet settings: group_max_running caps how many leases each group's tasks hold at once (0: no cap), " +
			"rate {per_second, burst} limits the queue's grants (absent: no limit; a claim over it gets nothing and a retry_after saying when the next token is there).",
		HTTP: &Route{Method: "PUT", Path: "/v1/queues/{queue}/settings", Namespaced: true},
		Tool: &Tool{Name: "set_queue_settings", Title: "Set a queue's fleet settings", Idempotent: true}},
		func(ctx context.Context, c *Call, in *queueSettingsIn) (*core.QueueSettings, error) {
			return c.core.SetQueueSettings(ctx, c.Actor, c.NS, in.Queue, in.QueueSettingsParams)
		}),
	op(Op{Name: core.ActGroupSettings, Summary: "Set one group's cap, rate and cooldown",
		Description: "Replace one group's settings in a queue: max_running over the queue's group_max_running, a rate of its own, " +
			"and cooldown_until, before which its ready tasks are not granted (the rest of the queue flows).",
		HTTP: &Route{Method: "PUT", Path: "/v1/queues/{queue}/groups", Namespaced: true},
		Tool: &Tool{Name: "set_group_settings", Title: "Set a group's settings", Idempotent: true}},
		func(ctx context.Context, c *Call, in *groupSettingsIn) (*core.GroupState, error) {
			return c.core.SetGroupSettings(ctx, c.Actor, c.NS, in.Queue, in.GroupSettingsParams)
		}),
}
