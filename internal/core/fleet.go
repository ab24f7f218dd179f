package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Claims that fit a fleet (issue 31). A task may require capabilities and
// belong to a group; a claim shows its claimant's capabilities. A queue's
// tasks of one group and one set of requires form a lane, a range of the
// claim index in claim order (store.FleetTx), so a claim seeks the heads
// of the lanes it can take — never a task it cannot — and picks among
// them: the highest priority first; at equal priority the group granted
// longest ago (a rotation across the groups with ready work); then the
// oldest. A group may cap its live leases and both queue and group may
// limit their rate (token buckets, kept in their rows, so the limits hold
// for a cluster); a worker may cool a group down when its run ends.
//
// A queue without lanes or settings takes the plain path: one seek of
// lane 0, with nothing read for the fleet (s.fleet remembers which queues
// have them).

// Fleet bounds.
const (
	MaxRequires     = 16
	MaxCapabilities = 64
	MaxGroupLen     = 128
	MaxCooldown     = 24 * 60 * 60
	MaxGroupRunning = 100_000
	MaxRatePerSec   = 100_000
	MaxRateBurst    = 100_000
	// UnmatchedAfter is how long a lane's ready tasks wait with no
	// claimant seen that could take them before they show as unmatched.
	UnmatchedAfter = 5 * time.Minute
	// claimantEvery is how often a node records a capability set it sees
	// claim on a queue: a write per set and minute, not per claim.
	claimantEvery = time.Minute
	// fleetPage bounds the lanes, groups and claimants a fleet read shows.
	fleetPage = 500
)

// CapabilityFormat is a capability's (and a requirement's) rule.
var CapabilityFormat = input.NewFormat(`^[a-z0-9._:/-]{1,64}$`, 64)

// Topic separators: a queue's topic + laneSep + a lane's requires (space
// separated) is new work of that lane; + capSep + capabilities is the
// topic a capable claim waits on (coordinator.go).
const (
	laneSep = "\x01"
	capSep  = "\x02"
)

// laneTopic is the topic that wakes the claims that can take task.
func laneTopic(task *tessera.Task) string {
	t := queueTopic(task.Namespace, task.Queue)
	if len(task.Requires) > 0 {
		t += laneSep + strings.Join(task.Requires, " ")
	}
	return t
}

// covers reports whether caps (sorted) hold every one of requires
// (sorted).
func covers(caps, requires []string) bool {
	i := 0
	for _, r := range requires {
		for i < len(caps) && caps[i] < r {
			i++
		}
		if i == len(caps) || caps[i] != r {
			return false
		}
	}
	return true
}

// canonical sorts labels and drops repeats: a set's one spelling, as
// stored and compared.
func canonical(labels []string) []string {
	if len(labels) == 0 {
		return nil
	}
	out := slices.Clone(labels)
	slices.Sort(out)
	return slices.Compact(out)
}

// Bounds of the fleet's fields, shared by the operations that take them.
var (
	requiresBound = input.List(0, MaxRequires, input.Match(CapabilityFormat)).
			Doc(fmt.Sprintf("up to %d capabilities ([a-z0-9._:/-], 1–64 bytes) a claimant must show (capabilities) to be granted the task", MaxRequires))
	capabilitiesBound = input.List(0, MaxCapabilities, input.Match(CapabilityFormat)).
				Doc(fmt.Sprintf("up to %d capabilities this claimant has: only tasks whose requires are all among them are granted", MaxCapabilities))
	groupBound = input.Line(0, MaxGroupLen).
			Doc(fmt.Sprintf("who the task is for (a tenant, a repository; up to %d bytes): claims rotate across a queue's groups, and a group's leases and rate can be capped", MaxGroupLen))
	cooldownBound = input.Range(0, MaxCooldown).
			Doc(fmt.Sprintf("pause the task's group for this many seconds (up to %d) once this run ends, e.g. after an upstream 429: its ready tasks wait, the rest of the queue flows", MaxCooldown))
	rateBound = input.Bound{}.Doc("a token bucket, {per_second, burst}: absent, no limit")
)

// Rate is a token bucket's rate, as the API takes and shows it.
type Rate tessera.Rate

func (Rate) Bounds() input.Bounds {
	return input.Bounds{
		"per_second": input.Range(0, MaxRatePerSec).Doc(fmt.Sprintf("tokens a second, 0–%d (0: no limit)", MaxRatePerSec)),
		"burst":      input.Range(0, MaxRateBurst).Doc(fmt.Sprintf("the most tokens saved up, 1–%d (0 or absent: per_second rounded up)", MaxRateBurst)),
	}
}

// rateOut is r as the API shows it: nil for no limit.
func rateOut(r tessera.Rate) *Rate {
	if !r.Limited() {
		return nil
	}
	out := Rate(r)
	return &out
}

// rateIn is an API rate as stored, its default burst filled in.
func rateIn(r *Rate) tessera.Rate {
	if r == nil || r.PerSecond <= 0 {
		return tessera.Rate{}
	}
	out := tessera.Rate(*r)
	if out.Burst == 0 {
		out.Burst = max(1, int(math.Ceil(out.PerSecond)))
	}
	return out
}

// take spends a token of rate's bucket at now, refilled since it was last
// written. It reports false, and how long until a token is there, when
// none is; a bucket never written starts full.
func take(rate tessera.Rate, b *store.Bucket, now time.Time) (bool, time.Duration) {
	if !rate.Limited() {
		return true, 0
	}
	tokens := float64(rate.Burst)
	if !b.At.IsZero() {
		tokens = min(float64(rate.Burst), b.Tokens+now.Sub(b.At).Seconds()*rate.PerSecond)
	}
	if tokens < 1 {
		return false, time.Duration((1 - tokens) / rate.PerSecond * float64(time.Second))
	}
	b.Tokens, b.At = tokens-1, now
	return true, 0
}

// fleetQueue reports, inside tx, whether queue's claims take the fleet
// path: it has lanes or settings.
func (s *Service) fleetQueue(ctx context.Context, tx store.Tx, ns, queue string) (bool, error) {
	return s.fleet.lookup(s, ns, queue, func() ([]string, error) { return tx.QueuesFleet(ctx, ns) })
}

// assignLane sets task's lane, creating it when new (which makes its
// queue a fleet queue on every node).
func assignLane(ctx context.Context, tx store.Tx, task *tessera.Task, now time.Time) error {
	if task.Group == "" && len(task.Requires) == 0 {
		return nil
	}
	lane, created, err := tx.LaneEnsure(ctx, task.Namespace, task.Queue, task.Group, task.Requires, now)
	if err != nil {
		return err
	}
	task.Lane = lane
	if created {
		tx.Notify(ctx, fleetTopic(task.Namespace))
	}
	return nil
}

// fleetClaim is what a fleet claim's grants share: the queue, the
// claimant's capabilities, the lease's holder and length, the clock.
type fleetClaim struct {
	ns, queue string
	caps      []string
	lease     tessera.Lease
	now       time.Time
}

// claimLanes grants up to len(runs) leases of a fleet queue, one pick at
// a time, and reports, when it granted fewer for a limit (a rate, a
// cooldown), how long until one lifts.
func (s *Service) claimLanes(ctx context.Context, tx store.Tx, c fleetClaim, runs []store.LeaseRun) ([]tessera.Task, time.Duration, error) {
	q, err := queueFleet(ctx, tx, c.ns, c.queue, false)
	if err != nil {
		return nil, 0, err
	}
	if q.Rate.Limited() {
		// Held from here on, so the cluster's claims spend its tokens
		// one at a time.
		if q, err = queueFleet(ctx, tx, c.ns, c.queue, true); err != nil {
			return nil, 0, err
		}
	}
	lanes, err := tx.LaneList(ctx, c.ns, c.queue)
	if err != nil {
		return nil, 0, err
	}
	byID := map[int64]store.Lane{0: {}}
	ids, grouped := []int64{0}, false
	for _, l := range lanes {
		grouped = grouped || l.Group != ""
		if covers(c.caps, l.Requires) {
			byID[l.ID] = l
			ids = append(ids, l.ID)
		}
	}
	var out []tessera.Task
	var wait time.Duration
	limited := func(d time.Duration) {
		if wait == 0 || d < wait {
			wait = d
		}
	}
	groups := map[string]*store.Group{}
	for len(out) < len(runs) && len(ids) > 0 {
		heads, err := tx.LaneHeads(ctx, c.ns, c.queue, ids, c.now)
		if err != nil {
			return nil, 0, err
		}
		if len(heads) == 0 {
			break
		}
		if grouped {
			var names []string
			for _, h := range heads {
				if g := byID[h.Lane].Group; groups[g] == nil && !slices.Contains(names, g) {
					names = append(names, g)
				}
			}
			rows, err := tx.GroupsGet(ctx, c.ns, c.queue, names)
			if err != nil {
				return nil, 0, err
			}
			for _, name := range names {
				g := rows[name] // a group without a row has never been granted
				groups[name] = &g
			}
		}
		// Claim order across lanes: priority, then (in a grouped queue)
		// the group granted longest ago, then the oldest task.
		slices.SortFunc(heads, func(a, b store.LaneHead) int {
			if a.Priority != b.Priority {
				return b.Priority - a.Priority
			}
			if grouped {
				ga, gb := groups[byID[a.Lane].Group], groups[byID[b.Lane].Group]
				if c := ga.LastGranted.Compare(gb.LastGranted); c != 0 {
					return c
				}
			}
			if c := a.RunAt.Compare(b.RunAt); c != 0 {
				return c
			}
			return strings.Compare(a.TaskID, b.TaskID)
		})
		task, closed, err := s.grantHead(ctx, tx, c, q, byID, heads, groups, grouped, runs[len(out)], limited)
		if err != nil {
			return nil, 0, err
		}
		ids = slices.DeleteFunc(ids, func(id int64) bool { return slices.Contains(closed, id) })
		if task == nil {
			break
		}
		out = append(out, *task)
	}
	return out, wait, nil
}

// grantHead grants the first of heads (in claim order) whose group's
// limits allow it, and returns the lanes it found closed to this claim
// (a group capped, limited or cooling down; a lane emptied under it). A
// queue whose rate is spent grants nothing.
func (s *Service) grantHead(ctx context.Context, tx store.Tx, c fleetClaim, q *store.QueueFleet, byID map[int64]store.Lane,
	heads []store.LaneHead, groups map[string]*store.Group, grouped bool, run store.LeaseRun, limited func(time.Duration)) (*tessera.Task, []int64, error) {
	var closed []int64
	closeGroup := func(g string) {
		for _, h := range heads {
			if byID[h.Lane].Group == g {
				closed = append(closed, h.Lane)
			}
		}
	}
	for _, h := range heads {
		name := byID[h.Lane].Group
		if slices.Contains(closed, h.Lane) {
			continue
		}
		var g *store.Group
		if grouped {
			// Held from here on: two nodes' claims of one group count its
			// leases and spend its tokens one after the other.
			var err error
			if g, err = tx.GroupLock(ctx, c.ns, c.queue, name); err != nil {
				return nil, nil, err
			}
			groups[name] = g
			// The lock may have been waited for: the grant, and the count
			// of live leases it is judged by, are as of when it was got.
			if now := s.clock.Now(); now.After(c.now) {
				c.now = now
			}
			if g.CooldownUntil != nil && g.CooldownUntil.After(c.now) {
				limited(g.CooldownUntil.Sub(c.now))
				closeGroup(name)
				continue
			}
			if limit := groupCap(q, g); limit > 0 && name != "" {
				n, err := tx.GroupLeases(ctx, c.ns, c.queue, name, c.now, limit)
				if err != nil {
					return nil, nil, err
				}
				if n >= limit {
					closeGroup(name) // a lease's end wakes the queue
					continue
				}
			}
			if ok, d := take(g.Rate, &g.Bucket, c.now); !ok {
				limited(d)
				closeGroup(name)
				continue
			}
		}
		if ok, d := take(q.Rate, &q.Bucket, c.now); !ok {
			limited(d)
			return nil, closed, nil
		}
		lease := c.lease
		lease.RunID, lease.TokenHash = run.RunID, run.TokenHash
		lease.ExpiresAt = c.now.Add(time.Duration(lease.Seconds) * time.Second)
		task, err := tx.TaskClaim(ctx, store.TaskClaim{Namespace: c.ns, Queue: c.queue, Lane: h.Lane, Now: c.now, Lease: lease})
		if errors.Is(err, store.ErrNotFound) {
			closed = append(closed, h.Lane) // taken meanwhile; its next head is looked for again
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if q.Rate.Limited() {
			if err := tx.QueueFleetPut(ctx, q); err != nil {
				return nil, nil, err
			}
		}
		if g != nil {
			// After every group the claim saw: the back of the rotation,
			// even when the clock has not moved since the last grant.
			last := c.now
			for _, o := range groups {
				if !o.LastGranted.Before(last) {
					last = o.LastGranted.Add(time.Millisecond)
				}
			}
			g.LastGranted = last
			if err := tx.GroupPut(ctx, g); err != nil {
				return nil, nil, err
			}
		}
		return task, closed, nil
	}
	return nil, closed, nil
}

// queueFleet is a queue's fleet row, or a queue's without one (no cap,
// no rate); with lock, held as store.FleetTx.QueueFleetGet holds.
func queueFleet(ctx context.Context, tx store.Tx, ns, queue string, lock bool) (*store.QueueFleet, error) {
	q, err := tx.QueueFleetGet(ctx, ns, queue, lock)
	if errors.Is(err, store.ErrNotFound) {
		return &store.QueueFleet{Namespace: ns, Queue: queue}, nil
	}
	return q, err
}

// groupState is g as the fleet view shows it, its live leases counted at
// now (to its cap, or fleetPage without one).
func groupState(ctx context.Context, tx store.Tx, q *store.QueueFleet, g *store.Group, now time.Time) (GroupState, error) {
	gs := GroupState{Group: g.Group, MaxRunning: g.MaxRunning, CooldownUntil: g.CooldownUntil, Rate: rateOut(g.Rate)}
	if !g.LastGranted.IsZero() {
		t := g.LastGranted
		gs.LastGrantedAt = &t
	}
	if g.Group == "" {
		return gs, nil // no cap applies to tasks without a group
	}
	limit := groupCap(q, g)
	if limit == 0 {
		limit = fleetPage
	}
	var err error
	gs.Running, err = tx.GroupLeases(ctx, q.Namespace, q.Queue, g.Group, now, limit)
	return gs, err
}

// groupCap is the cap on g's live leases: its own, else its queue's.
func groupCap(q *store.QueueFleet, g *store.Group) int {
	if g.MaxRunning != nil {
		return *g.MaxRunning
	}
	return q.GroupMaxRunning
}

// seenClaimant records, at most once a claimantEvery per node, the
// capabilities a claimant showed on a queue: what tells a lane no live
// worker could take.
func (s *Service) seenClaimant(ctx context.Context, tx store.Tx, ns, queue string, caps []string, now time.Time) error {
	key := ns + "\x00" + queue + "\x00" + strings.Join(caps, " ")
	s.claimantsMu.Lock()
	last, ok := s.claimants[key]
	if !ok || now.Sub(last) >= claimantEvery {
		if len(s.claimants) >= maxRemembered {
			clear(s.claimants)
		}
		s.claimants[key] = now
	}
	s.claimantsMu.Unlock()
	if ok && now.Sub(last) < claimantEvery {
		return nil
	}
	return tx.ClaimantSeen(ctx, ns, queue, caps, now)
}

// cooldown pauses task's group until now + seconds (or later, if it
// already was), inside the transaction that ends its run.
func cooldown(ctx context.Context, tx store.Tx, task *tessera.Task, seconds int, now time.Time) error {
	if seconds == 0 {
		return nil
	}
	if task.Group == "" {
		return tessera.Invalid("cooldown_seconds", "cooldown_seconds pauses the task's group, and task %s has none", task.ID)
	}
	g, err := tx.GroupLock(ctx, task.Namespace, task.Queue, task.Group)
	if err != nil {
		return err
	}
	until := now.Add(time.Duration(seconds) * time.Second)
	if g.CooldownUntil == nil || until.After(*g.CooldownUntil) {
		g.CooldownUntil = &until
	}
	return tx.GroupPut(ctx, g)
}

// QueueSettings are a queue's fleet settings.
type QueueSettings struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	// GroupMaxRunning caps each group's live leases (0: no cap) unless
	// the group sets its own.
	GroupMaxRunning int   `json:"group_max_running"`
	Rate            *Rate `json:"rate"`
}

// QueueSettingsParams is the body of PUT /v1/queues/{queue}/settings:
// the settings whole (absent: none).
type QueueSettingsParams struct {
	GroupMaxRunning int   `json:"group_max_running,omitempty"`
	Rate            *Rate `json:"rate,omitempty"`
}

func (QueueSettingsParams) Bounds() input.Bounds {
	return input.Bounds{
		"group_max_running": input.Range(0, MaxGroupRunning).Doc("the most live leases each group of the queue may hold at once (0: no cap), unless the group sets its own"),
		"rate":              rateBound,
	}
}

// GroupSettingsParams is the body of PUT /v1/queues/{queue}/groups: one
// group's settings whole (absent: none).
type GroupSettingsParams struct {
	Group         string     `json:"group"`
	MaxRunning    *int       `json:"max_running,omitempty"`
	Rate          *Rate      `json:"rate,omitempty"`
	CooldownUntil *time.Time `json:"cooldown_until,omitempty"`
}

func (GroupSettingsParams) Bounds() input.Bounds {
	return input.Bounds{
		"group":          input.Line(0, MaxGroupLen).Doc(`the group ("" for the queue's tasks without one)`),
		"max_running":    input.Range(0, MaxGroupRunning).Doc("the most live leases the group may hold at once, over the queue's group_max_running (absent: the queue's; 0: no cap)"),
		"rate":           rateBound,
		"cooldown_until": input.Bound{}.Doc("RFC 3339 time until which the group's ready tasks are not granted (absent or past: none)"),
	}
}

// GroupState is a group as the fleet view shows it.
type GroupState struct {
	Group         string     `json:"group"`
	MaxRunning    *int       `json:"max_running,omitempty"`
	Rate          *Rate      `json:"rate,omitempty"`
	CooldownUntil *time.Time `json:"cooldown_until,omitempty"`
	// Running is the group's live leases (counted up to its cap, or
	// fleetPage without one).
	Running       int        `json:"running"`
	LastGrantedAt *time.Time `json:"last_granted_at,omitempty"`
}

// LaneState is a lane as the fleet view shows it: a queue's tasks of one
// group and one set of requires.
type LaneState struct {
	Group    string   `json:"group"`
	Requires []string `json:"requires"`
	// Ready counts the lane's ready tasks, scheduled ones included.
	Ready                 int      `json:"ready"`
	OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
	// Unmatched says no claimant that could take the lane's tasks was
	// seen on the queue for UnmatchedSeconds (at least UnmatchedAfter):
	// since the last one that could, or since its oldest ready task.
	Unmatched        bool     `json:"unmatched"`
	UnmatchedSeconds *float64 `json:"unmatched_seconds,omitempty"`
	// MatchedAt is when a claimant that could take the lane's tasks was
	// last seen on the queue; absent while none was (a lane younger than
	// UnmatchedAfter is then not judged yet).
	MatchedAt *time.Time `json:"matched_at,omitempty"`
}

// Claimant is a capability set seen claiming on a queue.
type Claimant struct {
	Capabilities []string  `json:"capabilities"`
	SeenAt       time.Time `json:"seen_at"`
}

// Fleet is a queue's fleet view: its settings, groups, lanes and the
// capability sets seen claiming on it.
type Fleet struct {
	QueueSettings
	Time      time.Time    `json:"time"`
	Groups    []GroupState `json:"groups"`
	Lanes     []LaneState  `json:"lanes"`
	Claimants []Claimant   `json:"claimants"`
}

func settingsOf(q *store.QueueFleet) QueueSettings {
	return QueueSettings{Namespace: q.Namespace, Queue: q.Queue, GroupMaxRunning: q.GroupMaxRunning, Rate: rateOut(q.Rate)}
}

// QueueFleet reads a queue's fleet view.
func (s *Service) QueueFleet(ctx context.Context, a *auth.Actor, ns, queue string) (*Fleet, error) {
	a, err := s.authorize(ctx, a, ns, ActQueueFleet)
	if err != nil {
		return nil, err
	}
	var out *Fleet
	err = s.auditedRead(ctx, a, ns, ActQueueFleet, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target, ev.Queue = queue, queue
		out, err = fleetView(ctx, tx, ns, queue, s.clock.Now())
		return err
	})
	return out, err
}

func fleetView(ctx context.Context, tx store.Tx, ns, queue string, now time.Time) (*Fleet, error) {
	q, err := queueFleet(ctx, tx, ns, queue, false)
	if err != nil {
		return nil, err
	}
	out := &Fleet{QueueSettings: settingsOf(q), Time: now, Groups: []GroupState{}, Lanes: []LaneState{}, Claimants: []Claimant{}}
	groups, err := tx.GroupList(ctx, ns, queue, "", fleetPage)
	if err != nil {
		return nil, err
	}
	for i := range groups {
		gs, err := groupState(ctx, tx, q, &groups[i], now)
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, gs)
	}
	seen, err := tx.ClaimantList(ctx, ns, queue, now.Add(-24*time.Hour), fleetPage)
	if err != nil {
		return nil, err
	}
	for _, c := range seen {
		out.Claimants = append(out.Claimants, Claimant{Capabilities: orEmpty(c.Capabilities), SeenAt: c.SeenAt})
	}
	lanes, err := tx.LaneList(ctx, ns, queue)
	if err != nil {
		return nil, err
	}
	lanes = append([]store.Lane{{}}, lanes...)
	if len(lanes) > fleetPage {
		lanes = lanes[:fleetPage]
	}
	ids := make([]int64, len(lanes))
	for i, l := range lanes {
		ids[i] = l.ID
	}
	counts, err := tx.LaneReady(ctx, ns, queue, ids, now)
	if err != nil {
		return nil, err
	}
	for _, l := range lanes {
		c := counts[l.ID]
		if l.ID == 0 && c.Ready == 0 {
			continue
		}
		ls := LaneState{Group: l.Group, Requires: orEmpty(l.Requires), Ready: c.Ready}
		if !c.Oldest.IsZero() {
			age := now.Sub(c.Oldest).Seconds()
			ls.OldestReadyAgeSeconds = &age
			matched := time.Time{}
			for _, cl := range seen {
				if covers(cl.Capabilities, l.Requires) && cl.SeenAt.After(matched) {
					matched = cl.SeenAt
				}
			}
			since := c.Oldest
			if !matched.IsZero() {
				ls.MatchedAt = &matched
			}
			if matched.After(since) {
				since = matched
			}
			if now.Sub(since) >= UnmatchedAfter {
				ls.Unmatched = true
				d := now.Sub(since).Seconds()
				ls.UnmatchedSeconds = &d
			}
		}
		out.Lanes = append(out.Lanes, ls)
	}
	return out, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SetQueueSettings replaces a queue's fleet settings. A new rate starts
// with a full bucket.
func (s *Service) SetQueueSettings(ctx context.Context, a *auth.Actor, ns, queue string, p QueueSettingsParams) (*QueueSettings, error) {
	a, err := s.authorize(ctx, a, ns, ActQueueSettings)
	if err != nil {
		return nil, err
	}
	var out QueueSettings
	err = s.auditedCreate(ctx, a, ns, ActQueueSettings, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target, ev.Queue = queue, queue
		q, err := queueFleet(ctx, tx, ns, queue, true)
		if err != nil {
			return err
		}
		rate := rateIn(p.Rate)
		if rate != q.Rate {
			q.Bucket = store.Bucket{}
		}
		q.GroupMaxRunning, q.Rate = p.GroupMaxRunning, rate
		if err := tx.QueueFleetPut(ctx, q); err != nil {
			return err
		}
		tx.Notify(ctx, fleetTopic(ns))
		tx.Notify(ctx, queueTopic(ns, queue)) // a cap or rate lifted may let waiting claims through
		out = settingsOf(q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SetGroupSettings replaces one group's settings: its cap over the
// queue's, its rate, its cooldown.
func (s *Service) SetGroupSettings(ctx context.Context, a *auth.Actor, ns, queue string, p GroupSettingsParams) (*GroupState, error) {
	a, err := s.authorize(ctx, a, ns, ActGroupSettings)
	if err != nil {
		return nil, err
	}
	var out GroupState
	err = s.auditedCreate(ctx, a, ns, ActGroupSettings, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target, ev.Queue = queue, queue
		g, err := tx.GroupLock(ctx, ns, queue, p.Group)
		if err != nil {
			return err
		}
		rate := rateIn(p.Rate)
		if rate != g.Rate {
			g.Bucket = store.Bucket{}
		}
		g.MaxRunning, g.Rate, g.CooldownUntil = p.MaxRunning, rate, p.CooldownUntil
		if g.CooldownUntil != nil {
			until := g.CooldownUntil.UTC().Truncate(time.Millisecond)
			g.CooldownUntil = &until
		}
		if err := tx.GroupPut(ctx, g); err != nil {
			return err
		}
		// A group's settings make its queue a fleet queue, if it was not.
		q, err := tx.QueueFleetGet(ctx, ns, queue, false)
		if errors.Is(err, store.ErrNotFound) {
			q = &store.QueueFleet{Namespace: ns, Queue: queue}
			err = tx.QueueFleetPut(ctx, q)
		}
		if err != nil {
			return err
		}
		tx.Notify(ctx, fleetTopic(ns))
		tx.Notify(ctx, queueTopic(ns, queue))
		out, err = groupState(ctx, tx, q, g, ev.Time)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// uncoveredRequires is the hint of an empty claim on a fleet queue (§6's
// queue_known is the other): what the task that has waited longest among
// those ready now and not covered by caps requires, so a worker started
// with the wrong capabilities learns it instead of idling. Nil when every
// ready task is covered, the queue has no lanes, or the store cannot say:
// the hint is advice, and it costs a seek per lane only when the claim
// found nothing.
func (s *Service) uncoveredRequires(ctx context.Context, ns, queue string, caps []string) []string {
	var out []string
	_ = s.store.View(ctx, func(tx store.Tx) error {
		if fleet, err := s.fleetQueue(ctx, tx, ns, queue); err != nil || !fleet {
			return err
		}
		lanes, err := tx.LaneList(ctx, ns, queue)
		if err != nil {
			return err
		}
		requires := map[int64][]string{}
		var ids []int64
		for _, l := range lanes[:min(len(lanes), fleetPage)] {
			if !covers(caps, l.Requires) {
				requires[l.ID] = l.Requires
				ids = append(ids, l.ID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		heads, err := tx.LaneHeads(ctx, ns, queue, ids, s.clock.Now())
		if err != nil {
			return err
		}
		var oldest time.Time
		for _, h := range heads {
			if out == nil || h.RunAt.Before(oldest) {
				out, oldest = requires[h.Lane], h.RunAt
			}
		}
		return nil
	})
	return out
}
