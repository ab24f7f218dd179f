package core

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Public state (SPEC §3.2, §10): health, the board and the activity feed
// are served from a per-namespace snapshot kept 15 s on the domain clock
// and dropped by any successful state change in that namespace
// (StateChanged). A refresh reads the incrementally kept public tables of
// the store — counts, the board's task list, the ready index, the public
// event index — so it costs O(queues) plus the page shown, never O(tasks),
// and reads no brief, payload or private record value.
//
// The snapshot is per process: with several nodes each keeps its own, and
// invalidation will cross nodes with LISTEN/NOTIFY like long-poll wakeups.

const (
	// SnapshotTTL is how long a snapshot serves when nothing changes.
	SnapshotTTL = 15 * time.Second
	// BoardTaskLimit is how many public tasks the board shows, newest first.
	BoardTaskLimit = 100
	// BoardRecordLimit is how many public record heads the board shows.
	BoardRecordLimit = 50
	// BoardValueBytes is the largest record value the board shows whole;
	// a larger one is shown by its size only.
	BoardValueBytes = 16 << 10
	// maxSnapshotNamespaces bounds the namespaces kept before expired
	// snapshots are swept.
	maxSnapshotNamespaces = 1024
)

// StoredStates are the states the store keeps, in lifecycle order. Public
// counts use them: a scheduled task (ready, run_at ahead) is counted as
// ready, since counting it apart would cost a look at every ready task.
var StoredStates = []string{tessera.StateWaiting, tessera.StateGated, tessera.StateReady, tessera.StateLeased, tessera.StatePaused,
	tessera.StateSucceeded, tessera.StateDead, tessera.StateCanceled}

// Health is a namespace's public health (SPEC §3.2): its public tasks by
// queue and stored state, leases live and lapsed, and how long the oldest
// claimable task has waited, as of Time.
type Health struct {
	Status    string        `json:"status"`
	Namespace string        `json:"namespace"`
	Time      time.Time     `json:"time"`
	Queues    []QueueHealth `json:"queues"`
	Totals    HealthTotals  `json:"totals"`
}

// HealthTotals sums the queues.
type HealthTotals struct {
	// Counts maps each stored state to a number of public tasks; ready
	// includes scheduled tasks (ready with a run_at still ahead).
	Counts        map[string]int `json:"counts"`
	LiveLeases    int            `json:"live_leases"`
	ExpiredLeases int            `json:"expired_leases"`
}

// QueueHealth is one queue's share of Health.
type QueueHealth struct {
	Queue string `json:"queue"`
	// Counts maps each stored state to a number of public tasks; ready
	// includes scheduled tasks.
	Counts map[string]int `json:"counts"`
	// LiveLeases hold their task now; ExpiredLeases ran out but nobody
	// has noticed yet (the next claim, heartbeat or submit will).
	LiveLeases    int `json:"live_leases"`
	ExpiredLeases int `json:"expired_leases"`
	// OldestReadyAgeSeconds is how long the oldest claimable public task
	// has waited since its run_at; null when none is claimable.
	OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
}

// Board is what /board shows: the health, the newest public tasks grouped
// by the state a client sees, and the heads of the public buckets.
type Board struct {
	Namespace string    `json:"namespace"`
	Time      time.Time `json:"time"`
	Health    Health    `json:"health"`
	// Tasks maps a visible state to its tasks, newest first; all states
	// together hold at most BoardTaskLimit tasks.
	Tasks map[string][]BoardTask `json:"tasks"`
	// TaskLimit is how many tasks the board shows at most.
	TaskLimit int           `json:"task_limit"`
	Buckets   []BoardBucket `json:"buckets"`
}

// BoardTask is a public task on the board: no brief, payload or result.
type BoardTask struct {
	ID        string    `json:"id"`
	Queue     string    `json:"queue"`
	Title     string    `json:"title"`
	State     string    `json:"state"`
	Priority  int       `json:"priority"`
	RunAt     time.Time `json:"run_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// BoardBucket is a public bucket with its record heads, ordered by key.
type BoardBucket struct {
	Name    string        `json:"name"`
	Records []BoardRecord `json:"records"`
}

// BoardRecord is a record head on the board.
type BoardRecord struct {
	Key     string `json:"key"`
	Version int64  `json:"version"`
	// Value is the head's value, unless it is over BoardValueBytes: then
	// only ValueBytes says how large it is.
	Value      json.RawMessage `json:"value,omitempty"`
	ValueBytes int             `json:"value_bytes"`
	UpdatedAt  time.Time       `json:"updated_at"`
	TaskID     string          `json:"task_id,omitempty"`
}

// ActivityPage is a page of the public activity feed, newest first.
type ActivityPage struct {
	Events     []ActivityEvent `json:"events"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// ActivityEvent is a public event, redacted for anyone to read: the actor
// by display name and kind only, no key, principal id, token or address.
type ActivityEvent struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Summary string    `json:"summary"`
	Target  string    `json:"target"`
	Title   string    `json:"title,omitempty"`
	RunID   string    `json:"run_id,omitempty"`
	By      string    `json:"by"`
	ByKind  string    `json:"by_kind,omitempty"`
}

// Health returns ns's public health from its snapshot. Without an actor
// only the main namespace may be read, and no key or identity is looked
// up; with one, the key needs read on ns, and the read is audited.
func (s *Service) Health(ctx context.Context, a *auth.Actor, ns string) (*Health, error) {
	a, err := s.publicCaller(ctx, a, ns, ActHealth)
	if err != nil {
		return nil, err
	}
	h, err := s.healthSnapshot(ctx, ns)
	if err != nil {
		return nil, err
	}
	if err := s.auditPublicRead(ctx, a, ns, ActHealth, "health"); err != nil {
		return nil, err
	}
	return h, nil
}

// Board returns ns's board from its snapshot, under the rules of Health.
func (s *Service) Board(ctx context.Context, a *auth.Actor, ns string) (*Board, error) {
	a, err := s.publicCaller(ctx, a, ns, ActBoard)
	if err != nil {
		return nil, err
	}
	b, err := s.boardSnapshot(ctx, ns)
	if err != nil {
		return nil, err
	}
	if err := s.auditPublicRead(ctx, a, ns, ActBoard, "board"); err != nil {
		return nil, err
	}
	return b, nil
}

// Activity returns a page of ns's public events of the last 24 h, newest
// first, under the rules of Health. The first page at the default size
// comes from the snapshot; later pages from the store's public event
// index, a page's worth of rows each.
func (s *Service) Activity(ctx context.Context, a *auth.Actor, ns, cursor string, limit int) (*ActivityPage, error) {
	a, err := s.publicCaller(ctx, a, ns, ActActivity)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = DefaultListSize
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, tessera.Invalid("limit", "limit must be 1–%d", MaxListLimit)
	}
	var before string
	if cursor != "" {
		if before, err = decodeCursor(cursor); err != nil {
			return nil, tessera.Invalid("cursor", "cursor is not one this server issued")
		}
	}
	var page *ActivityPage
	if cursor == "" && limit == DefaultListSize {
		page, err = snapshot(ctx, s, ns, func(e *nsSnapshot) *cached[ActivityPage] { return &e.activity },
			func(now time.Time) (*ActivityPage, error) { return s.readActivity(ctx, ns, now, "", limit) }, nil)
	} else {
		page, err = s.readActivity(ctx, ns, s.clock.Now(), before, limit)
	}
	if err != nil {
		return nil, err
	}
	if err := s.auditPublicRead(ctx, a, ns, ActActivity, "activity"); err != nil {
		return nil, err
	}
	return page, nil
}

// StateChanged drops ns's snapshot: the next health, board or activity
// read refreshes it. The service's store calls it after every committed
// transaction that inserted or updated a task, or wrote a record, bucket
// or blob of ns (statechange.go), which covers every core path; a state
// change made some other way (a namespace purge) must call it once its
// transaction committed. Reads must not: a keyed health read would drop
// the snapshot it just used. It costs a map lookup.
func (s *Service) StateChanged(ns string) {
	sn := &s.snaps
	sn.mu.Lock()
	if e := sn.byNS[ns]; e != nil {
		e.drop()
	}
	sn.mu.Unlock()
}

// dropAll drops every namespace's snapshot.
func (sn *snapshots) dropAll() {
	sn.mu.Lock()
	for _, e := range sn.byNS {
		e.drop()
	}
	sn.mu.Unlock()
}

// publicCaller checks the caller of a public read: nobody may read main,
// a key with read anything its grants cover.
func (s *Service) publicCaller(ctx context.Context, a *auth.Actor, ns, op string) (*auth.Actor, error) {
	if a == nil {
		if ns != tessera.MainNamespace {
			return nil, tessera.ErrUnauthorized
		}
		return nil, nil
	}
	return s.authorize(ctx, a, ns, op)
}

// auditPublicRead writes the audit event of a keyed public read; a keyless
// read has no principal to attribute, and writes nothing.
func (s *Service) auditPublicRead(ctx context.Context, a *auth.Actor, ns, action, target string) error {
	if a == nil {
		return nil
	}
	return s.auditedRead(ctx, a, ns, action, func(_ store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = target
		return nil
	})
}

// snapshots holds the per-namespace snapshots. Its zero value is ready.
type snapshots struct {
	mu   sync.Mutex
	byNS map[string]*nsSnapshot
}

// nsSnapshot is one namespace's snapshot, in parts built on demand: a
// /healthz probe never pays for the board. gen counts state changes; a
// part built at an older generation is stale.
type nsSnapshot struct {
	gen uint64
	// sem lets one refresh run at a time: concurrent readers of a stale
	// part wait for it, then find it fresh.
	sem      chan struct{}
	health   cached[Health]
	board    cached[Board]
	activity cached[ActivityPage]
}

type cached[T any] struct {
	val *T
	gen uint64
	at  time.Time
}

// fresh returns the value if it was built at generation gen less than
// SnapshotTTL before now (a clock that went back counts as stale).
func (c *cached[T]) fresh(gen uint64, now time.Time) *T {
	if c.val == nil || c.gen != gen {
		return nil
	}
	if age := now.Sub(c.at); age < 0 || age >= SnapshotTTL {
		return nil
	}
	return c.val
}

// drop makes every part stale. sn.mu held.
func (e *nsSnapshot) drop() {
	e.gen++
	e.health, e.board, e.activity = cached[Health]{}, cached[Board]{}, cached[ActivityPage]{}
}

func (e *nsSnapshot) idle(now time.Time) bool {
	if len(e.sem) > 0 {
		return false
	}
	return e.health.fresh(e.gen, now) == nil && e.board.fresh(e.gen, now) == nil && e.activity.fresh(e.gen, now) == nil
}

// entry returns ns's snapshot, creating it. sn.mu held.
func (sn *snapshots) entry(ns string, now time.Time) *nsSnapshot {
	if e := sn.byNS[ns]; e != nil {
		return e
	}
	if sn.byNS == nil {
		sn.byNS = map[string]*nsSnapshot{}
	}
	if len(sn.byNS) >= maxSnapshotNamespaces {
		for name, e := range sn.byNS {
			if e.idle(now) {
				delete(sn.byNS, name)
			}
		}
	}
	e := &nsSnapshot{sem: make(chan struct{}, 1)}
	sn.byNS[ns] = e
	return e
}

// snapshot returns a fresh part of ns's snapshot, building it with build
// when it is missing, stale or older than SnapshotTTL. Refreshes of one
// namespace run one at a time. after, if not nil, runs with the new part
// while the snapshot is locked (the board refreshes health too).
func snapshot[T any](ctx context.Context, s *Service, ns string, part func(*nsSnapshot) *cached[T],
	build func(now time.Time) (*T, error), after func(e *nsSnapshot, c cached[T])) (*T, error) {
	sn := &s.snaps
	sn.mu.Lock()
	e := sn.entry(ns, s.clock.Now())
	v := part(e).fresh(e.gen, s.clock.Now())
	sn.mu.Unlock()
	if v != nil {
		return v, nil
	}

	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.sem }()
	// Whoever held the refresh may have just built it.
	sn.mu.Lock()
	gen, now := e.gen, s.clock.Now()
	v = part(e).fresh(gen, now)
	sn.mu.Unlock()
	if v != nil {
		return v, nil
	}

	// gen was read before the store: a change committed during the build
	// bumps it, and the part built here is stale at once.
	v, err := build(now)
	if err != nil {
		return nil, err
	}
	c := cached[T]{val: v, gen: gen, at: now}
	sn.mu.Lock()
	*part(e) = c
	if after != nil {
		after(e, c)
	}
	sn.mu.Unlock()
	return v, nil
}

func (s *Service) healthSnapshot(ctx context.Context, ns string) (*Health, error) {
	return snapshot(ctx, s, ns, func(e *nsSnapshot) *cached[Health] { return &e.health },
		func(now time.Time) (*Health, error) {
			var h *Health
			err := s.store.View(ctx, func(tx store.Tx) (err error) {
				h, err = readHealth(ctx, tx, ns, now, store.PublicOnly)
				return err
			})
			return h, err
		}, nil)
}

func (s *Service) boardSnapshot(ctx context.Context, ns string) (*Board, error) {
	return snapshot(ctx, s, ns, func(e *nsSnapshot) *cached[Board] { return &e.board },
		func(now time.Time) (*Board, error) {
			var b *Board
			err := s.store.View(ctx, func(tx store.Tx) (err error) {
				b, err = readBoard(ctx, tx, ns, now)
				return err
			})
			return b, err
		},
		// The board holds a health as fresh as itself: keep it for
		// /v1/health too.
		func(e *nsSnapshot, c cached[Board]) {
			e.health = cached[Health]{val: &c.val.Health, gen: c.gen, at: c.at}
		})
}

// readHealth builds a Health of the tasks v covers in tx: the counts (one
// row per queue and state), then lapsed leases of the queues holding
// leases (one indexed query) and the oldest ready task of the queues
// holding ready ones (one seek per queue).
func readHealth(ctx context.Context, tx store.Tx, ns string, now time.Time, v store.Visibility) (*Health, error) {
	rows, err := tx.TaskStateCounts(ctx, ns, v)
	if err != nil {
		return nil, err
	}
	h := &Health{Status: "ok", Namespace: ns, Time: now, Queues: []QueueHealth{},
		Totals: HealthTotals{Counts: zeroCounts()}}
	byQueue := map[string]*QueueHealth{}
	var order, leased, ready []string
	for _, r := range rows {
		if r.Count == 0 {
			continue
		}
		q := byQueue[r.Queue]
		if q == nil {
			q = &QueueHealth{Queue: r.Queue, Counts: zeroCounts()}
			byQueue[r.Queue] = q
			order = append(order, r.Queue)
		}
		q.Counts[r.State] += r.Count
		h.Totals.Counts[r.State] += r.Count
		switch r.State {
		case tessera.StateLeased:
			leased = append(leased, r.Queue)
		case tessera.StateReady:
			ready = append(ready, r.Queue)
		}
	}
	lapsed, err := tx.TaskLapsedCounts(ctx, ns, leased, now, v)
	if err != nil {
		return nil, err
	}
	oldest, err := tx.TaskOldestReady(ctx, ns, ready, now, v)
	if err != nil {
		return nil, err
	}
	slices.Sort(order)
	for _, name := range order {
		q := byQueue[name]
		q.ExpiredLeases = min(lapsed[name], q.Counts[tessera.StateLeased])
		q.LiveLeases = q.Counts[tessera.StateLeased] - q.ExpiredLeases
		if at, ok := oldest[name]; ok {
			age := float64(now.Sub(at).Milliseconds()) / 1000
			q.OldestReadyAgeSeconds = &age
		}
		h.Totals.LiveLeases += q.LiveLeases
		h.Totals.ExpiredLeases += q.ExpiredLeases
		h.Queues = append(h.Queues, *q)
	}
	return h, nil
}

func zeroCounts() map[string]int {
	m := make(map[string]int, len(StoredStates))
	for _, st := range StoredStates {
		m[st] = 0
	}
	return m
}

// readBoard builds a Board in tx: the health, the newest public tasks and
// the public buckets' heads, each a bounded page.
func readBoard(ctx context.Context, tx store.Tx, ns string, now time.Time) (*Board, error) {
	h, err := readHealth(ctx, tx, ns, now, store.PublicOnly)
	if err != nil {
		return nil, err
	}
	tasks, err := tx.PublicTasks(ctx, ns, BoardTaskLimit)
	if err != nil {
		return nil, err
	}
	heads, err := tx.RecordPublicHeads(ctx, ns, "", "", BoardRecordLimit)
	if err != nil {
		return nil, err
	}
	b := &Board{Namespace: ns, Time: now, Health: *h, Tasks: map[string][]BoardTask{}, TaskLimit: BoardTaskLimit,
		Buckets: []BoardBucket{}}
	for _, t := range tasks {
		state := t.State
		if state == tessera.StateReady && t.RunAt.After(now) {
			state = tessera.StateScheduled
		}
		b.Tasks[state] = append(b.Tasks[state], BoardTask{ID: t.ID, Queue: t.Queue, Title: t.Title, State: state,
			Priority: t.Priority, RunAt: t.RunAt, UpdatedAt: t.UpdatedAt})
	}
	for _, r := range heads {
		if n := len(b.Buckets); n == 0 || b.Buckets[n-1].Name != r.Bucket {
			b.Buckets = append(b.Buckets, BoardBucket{Name: r.Bucket, Records: []BoardRecord{}})
		}
		rec := BoardRecord{Key: r.Key, Version: r.Version, ValueBytes: len(r.Value), UpdatedAt: r.CreatedAt, TaskID: r.TaskID}
		if len(r.Value) <= BoardValueBytes {
			rec.Value = r.Value
		}
		last := &b.Buckets[len(b.Buckets)-1]
		last.Records = append(last.Records, rec)
	}
	return b, nil
}

// readActivity reads a page of public events of the audit window.
func (s *Service) readActivity(ctx context.Context, ns string, now time.Time, before string, limit int) (*ActivityPage, error) {
	var events []store.PublicEvent
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		events, err = tx.AuditPublicEvents(ctx, ns, now.Add(-AuditWindow), before, limit+1)
		return err
	})
	if err != nil {
		return nil, err
	}
	page := &ActivityPage{Events: make([]ActivityEvent, 0, min(len(events), limit))}
	if len(events) > limit {
		events = events[:limit]
		page.NextCursor = encodeCursor(events[limit-1].ID)
	}
	for _, e := range events {
		by := e.By
		if by == "" {
			by = "someone"
		}
		page.Events = append(page.Events, ActivityEvent{ID: e.ID, Time: e.Time, Action: e.Action,
			Summary: activitySummary(by, e), Target: e.Target, Title: e.Title, RunID: e.RunID, By: by, ByKind: e.ByKind})
	}
	return page, nil
}

// activityVerbs say what an action did, for the feed's summaries.
var activityVerbs = map[string]string{
	ActTaskEnqueue: "enqueued", ActTaskCancel: "canceled", ActTaskPause: "paused", ActTaskResume: "resumed",
	ActTaskRetry: "retried", ActClaim: "claimed", ActSubmit: "submitted", ActRelease: "released",
	ActRecordWrite: "wrote", ActBucketPut: "changed bucket", ActTaskLapse: "let the lease lapse on",
}

func activitySummary(by string, e store.PublicEvent) string {
	verb, ok := activityVerbs[e.Action]
	if !ok {
		verb = e.Action
	}
	what := e.Target
	if e.Title != "" {
		what = "“" + e.Title + "”"
	}
	return by + " " + verb + " " + what
}
