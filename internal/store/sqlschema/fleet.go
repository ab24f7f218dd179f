package sqlschema

import (
	"strings"
	"time"
)

// NeverZero is a time that may be zero (never) as stored: Unix
// milliseconds, 0 for never.
func NeverZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// GroupsIn is GroupsGet's list of n placeholders, in parentheses.
func GroupsIn(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")" }

// The fleet statements both backends run alike (store.FleetTx), with ?
// placeholders.
const (
	LaneGet    = `SELECT id FROM task_lanes WHERE namespace = ? AND queue = ? AND grp = ? AND requires = ?`
	LaneInsert = `INSERT INTO task_lanes (namespace, queue, grp, requires, created_at) VALUES (?, ?, ?, ?, ?)
 ON CONFLICT DO NOTHING RETURNING id`
	LaneList = `SELECT id, grp, requires FROM task_lanes WHERE namespace = ? AND queue = ? ORDER BY id`

	QueueFleetEnsure = `INSERT INTO queue_fleet (namespace, queue) VALUES (?, ?) ON CONFLICT DO NOTHING`
	QueuesFleet      = `SELECT queue FROM queue_fleet WHERE namespace = ? ORDER BY queue`
	QueueFleetGet    = `SELECT group_max_running, rate_per_second, rate_burst, tokens, tokens_at FROM queue_fleet
 WHERE namespace = ? AND queue = ?`
	QueueFleetPut = `INSERT INTO queue_fleet (namespace, queue, group_max_running, rate_per_second, rate_burst, tokens, tokens_at)
 VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, queue) DO UPDATE SET group_max_running = excluded.group_max_running,
 rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst, tokens = excluded.tokens, tokens_at = excluded.tokens_at`

	GroupEnsure = `INSERT INTO task_groups (namespace, queue, grp) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`
	// GroupCols are a group row's columns as the backends scan them.
	GroupCols = `grp, max_running, rate_per_second, rate_burst, tokens, tokens_at, cooldown_until, last_granted`
	GroupGet  = `SELECT ` + GroupCols + ` FROM task_groups WHERE namespace = ? AND queue = ? AND grp = ?`
	// GroupsGet is GroupGet of several groups: arguments namespace,
	// queue, then the groups, one ? each (GroupsIn).
	GroupsGet = `SELECT ` + GroupCols + ` FROM task_groups WHERE namespace = ? AND queue = ? AND grp IN `
	GroupList = `SELECT ` + GroupCols + ` FROM task_groups WHERE namespace = ? AND queue = ? AND grp > ? ORDER BY grp LIMIT ?`
	GroupPut  = `INSERT INTO task_groups (namespace, queue, ` + GroupCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
 ON CONFLICT (namespace, queue, grp) DO UPDATE SET max_running = excluded.max_running, rate_per_second = excluded.rate_per_second,
 rate_burst = excluded.rate_burst, tokens = excluded.tokens, tokens_at = excluded.tokens_at,
 cooldown_until = excluded.cooldown_until, last_granted = excluded.last_granted`
	// GroupLeases counts a group's live leases up to a limit, walking the
	// live leases of its queue in the claim index (tasks_claim on either
	// backend): an index of grouped leases would be an entry more in every
	// task write, and a queue's live leases are as many as its workers.
	// Arguments: namespace, queue, now, group, limit.
	GroupLeases = `SELECT count(*) FROM (SELECT 1 FROM tasks WHERE finished_at IS NULL AND namespace = ? AND queue = ? AND state = 'leased'
 AND lease_expires_at > ? AND grp = ? LIMIT ?) s`

	ClaimantSeen = `INSERT INTO queue_claimants (namespace, queue, capabilities, seen_at) VALUES (?, ?, ?, ?)
 ON CONFLICT (namespace, queue, capabilities) DO UPDATE SET seen_at = excluded.seen_at WHERE excluded.seen_at > queue_claimants.seen_at`
	ClaimantList = `SELECT capabilities, seen_at FROM queue_claimants WHERE namespace = ? AND queue = ? AND seen_at >= ?
 ORDER BY seen_at DESC LIMIT ?`
)
