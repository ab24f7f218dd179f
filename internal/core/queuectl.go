package core

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Queues as the operator console sees them: paused or not, their depth by
// state, leases live and lapsed, how long the oldest ready task has
// waited, and how many runs ended each minute of the last few.

// Queue bounds.
const (
	// MaxPurge bounds the tasks one purge deletes; more is another call.
	MaxPurge = 1000
	// ThroughputMinutes is how far back a queue's throughput reaches.
	ThroughputMinutes = 15
	// throughputScan bounds the audit events a throughput read looks at:
	// a namespace busier than this per window shows fewer minutes.
	throughputScan = 50_000
)

// FinishedStates are the states a purge deletes tasks in.
var FinishedStates = []string{tessera.StateSucceeded, tessera.StateDead, tessera.StateCanceled}

// queueSets remembers, per namespace, a set of its queues kept in the
// store — the paused ones, the ones whose claims take the fleet path — so
// a claim checks its queue without a statement. A change notifies the
// set's namespace topic on every node, which forgets the namespace here;
// a gap in the notifications forgets them all. gen makes a read that
// raced a forget not be remembered.
type queueSets struct {
	mu   sync.Mutex
	gen  uint64
	byNS map[string]map[string]bool
}

func (p *queueSets) forget(ns string) {
	p.mu.Lock()
	delete(p.byNS, ns)
	p.gen++
	p.mu.Unlock()
}

func (p *queueSets) forgetAll() {
	p.mu.Lock()
	p.byNS = nil
	p.gen++
	p.mu.Unlock()
}

// has reports what this node remembers of queue: for an empty claim's
// answer, which the claim's own look has just refreshed.
func (p *queueSets) has(ns, queue string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byNS[ns][queue]
}

// lookup reports, inside a transaction, whether queue of ns is in the
// set: from memory while this node hears every change (a listener that
// may miss other nodes' is not trusted), else from load, remembered.
func (p *queueSets) lookup(s *Service, ns, queue string, load func() ([]string, error)) (bool, error) {
	trust := true
	if l, ok := s.StoreListener(); ok && !l.Healthy {
		trust = false
	}
	p.mu.Lock()
	set, ok := p.byNS[ns]
	gen := p.gen
	p.mu.Unlock()
	if ok && trust {
		return set[queue], nil
	}
	list, err := load()
	if err != nil {
		return false, err
	}
	set = make(map[string]bool, len(list))
	for _, q := range list {
		set[q] = true
	}
	if trust {
		p.mu.Lock()
		if p.gen == gen {
			if p.byNS == nil || len(p.byNS) >= maxRemembered {
				p.byNS = map[string]map[string]bool{}
			}
			p.byNS[ns] = set
		}
		p.mu.Unlock()
	}
	return set[queue], nil
}

// queuePaused reports, inside tx, whether queue of ns is paused.
func (s *Service) queuePaused(ctx context.Context, tx store.Tx, ns, queue string) (bool, error) {
	return s.pauses.lookup(s, ns, queue, func() ([]string, error) {
		list, err := tx.QueuesPaused(ctx, ns)
		names := make([]string, len(list))
		for i, q := range list {
			names[i] = q.Queue
		}
		return names, err
	})
}

// QueueState is a queue's pause, as a pause or resume answers it.
type QueueState struct {
	Namespace string     `json:"namespace"`
	Queue     string     `json:"queue"`
	Paused    bool       `json:"paused"`
	PausedAt  *time.Time `json:"paused_at,omitempty"`
	PausedBy  string     `json:"paused_by,omitempty"`
}

// PauseQueue pauses a queue: claims on it find nothing until it is
// resumed; leases held already run on. Pausing a paused queue changes
// nothing.
func (s *Service) PauseQueue(ctx context.Context, a *auth.Actor, ns, queue string) (*QueueState, error) {
	return s.setPause(ctx, a, ns, queue, true)
}

// ResumeQueue resumes a paused queue, and wakes the claims waiting on it.
func (s *Service) ResumeQueue(ctx context.Context, a *auth.Actor, ns, queue string) (*QueueState, error) {
	return s.setPause(ctx, a, ns, queue, false)
}

func (s *Service) setPause(ctx context.Context, a *auth.Actor, ns, queue string, pause bool) (*QueueState, error) {
	op := ActQueueResume
	if pause {
		op = ActQueuePause
	}
	a, err := s.authorize(ctx, a, ns, op)
	if err != nil {
		return nil, err
	}
	out := &QueueState{Namespace: ns, Queue: queue, Paused: pause}
	err = s.auditedCreate(ctx, a, ns, op, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target, ev.Queue = queue, queue
		if pause {
			at := ev.Time
			out.PausedAt, out.PausedBy = &at, a.Principal.ID
			if _, err := tx.QueuePause(ctx, store.QueuePause{Namespace: ns, Queue: queue, PausedBy: a.Principal.ID, PausedAt: at}); err != nil {
				return err
			}
		} else {
			if _, err := tx.QueueResume(ctx, ns, queue); err != nil {
				return err
			}
			tx.Notify(ctx, queueTopic(ns, queue))
		}
		tx.Notify(ctx, pauseTopic(ns))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QueuePurged is a queue purge's answer.
type QueuePurged struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Purged    int    `json:"purged"`
	// More says the purge stopped at its bound: call again for the rest.
	More bool `json:"more"`
}

// PurgeQueue deletes up to MaxPurge finished tasks of a queue — in the
// given states, by default every finished one — with their runs and
// events. The audit trail keeps what happened to them for its window.
func (s *Service) PurgeQueue(ctx context.Context, a *auth.Actor, ns, queue string, states []string) (*QueuePurged, error) {
	a, err := s.authorize(ctx, a, ns, ActQueuePurge)
	if err != nil {
		return nil, err
	}
	if len(states) == 0 {
		states = FinishedStates
	}
	out := &QueuePurged{Namespace: ns, Queue: queue}
	err = s.audited(ctx, a, ns, ActQueuePurge, func(tx store.Tx, ev *tessera.AuditEvent) (err error) {
		ev.Target, ev.Queue = queue, queue
		out.Purged, err = tx.TaskPurgeFinished(ctx, ns, queue, states, MaxPurge)
		out.More = out.Purged == MaxPurge
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QueuesPage is every queue of a namespace, by name.
type QueuesPage struct {
	Namespace string       `json:"namespace"`
	Time      time.Time    `json:"time"`
	Queues    []QueueStats `json:"queues"`
}

// QueueStats is one queue, as the console shows it.
type QueueStats struct {
	Queue string `json:"queue"`
	// Counts maps each state a client sees to its tasks.
	Counts map[string]int `json:"counts"`
	// LiveLeases hold their task now; LapsedLeases ran out and nobody
	// has noticed yet (the next claim, heartbeat or submit will).
	LiveLeases   int `json:"live_leases"`
	LapsedLeases int `json:"lapsed_leases"`
	// OldestReadyAgeSeconds is how long the oldest claimable task has
	// waited since its run_at; null when none is claimable.
	OldestReadyAgeSeconds *float64   `json:"oldest_ready_age_seconds"`
	Paused                bool       `json:"paused"`
	PausedAt              *time.Time `json:"paused_at,omitempty"`
	PausedBy              string     `json:"paused_by,omitempty"`
	// Throughput is the runs that ended in each of the last
	// ThroughputMinutes minutes, oldest first.
	Throughput []Minute `json:"throughput"`
}

// Minute is the runs of a queue that ended in one minute, by how.
type Minute struct {
	Minute    time.Time `json:"minute"`
	Succeeded int       `json:"succeeded"`
	// Failed ended with attempts left (failed or lapsed), Dead without.
	Failed int `json:"failed"`
	Dead   int `json:"dead"`
}

// ListQueues returns every queue of ns: its tasks by state, leases, the
// oldest ready task's wait, whether it is paused, and its throughput.
// Counts come from the store's kept counts (O(queues)); throughput from a
// bounded look at the audit trail.
func (s *Service) ListQueues(ctx context.Context, a *auth.Actor, ns string) (*QueuesPage, error) {
	a, err := s.authorize(ctx, a, ns, ActQueueList)
	if err != nil {
		return nil, err
	}
	var out *QueuesPage
	err = s.auditedRead(ctx, a, ns, ActQueueList, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "queues"
		now := s.clock.Now()
		h, err := readHealth(ctx, tx, ns, now, store.AllTasks)
		if err != nil {
			return err
		}
		paused, err := tx.QueuesPaused(ctx, ns)
		if err != nil {
			return err
		}
		first := now.Truncate(time.Minute).Add(-(ThroughputMinutes - 1) * time.Minute)
		ends, err := tx.AuditThroughput(ctx, ns, first, []string{ActSubmit, ActTaskLapse}, throughputScan)
		if err != nil {
			return err
		}
		out, err = queueStats(ctx, tx, ns, now, h, paused, ends, first)
		return err
	})
	return out, err
}

// queueStats puts together what ListQueues read.
func queueStats(ctx context.Context, tx store.Tx, ns string, now time.Time, h *Health, paused []store.QueuePause,
	ends []store.Throughput, first time.Time) (*QueuesPage, error) {
	byName := map[string]*QueueStats{}
	get := func(name string) *QueueStats {
		q := byName[name]
		if q == nil {
			q = &QueueStats{Queue: name, Counts: map[string]int{}, Throughput: make([]Minute, ThroughputMinutes)}
			for i := range q.Throughput {
				q.Throughput[i].Minute = first.Add(time.Duration(i) * time.Minute)
			}
			byName[name] = q
		}
		return q
	}
	var ready []string
	for _, qh := range h.Queues {
		q := get(qh.Queue)
		for st, n := range qh.Counts {
			if n > 0 {
				q.Counts[st] = n
			}
		}
		q.LiveLeases, q.LapsedLeases, q.OldestReadyAgeSeconds = qh.LiveLeases, qh.ExpiredLeases, qh.OldestReadyAgeSeconds
		if qh.Counts[tessera.StateReady] > 0 {
			ready = append(ready, qh.Queue)
		}
	}
	// Stored ready counts scheduled tasks too: told apart as Counts does.
	scheduled, err := tx.TaskScheduled(ctx, ns, ready, now, store.AllTasks)
	if err != nil {
		return nil, err
	}
	for name, n := range scheduled {
		q := get(name)
		q.Counts[tessera.StateScheduled] = n
		if q.Counts[tessera.StateReady] -= n; q.Counts[tessera.StateReady] <= 0 {
			delete(q.Counts, tessera.StateReady)
		}
	}
	for _, p := range paused {
		q := get(p.Queue)
		at := p.PausedAt
		q.Paused, q.PausedAt, q.PausedBy = true, &at, p.PausedBy
	}
	for _, e := range ends {
		i := int(e.Minute.Sub(first) / time.Minute)
		if i < 0 || i >= ThroughputMinutes {
			continue
		}
		m := &get(e.Queue).Throughput[i]
		switch e.State {
		case tessera.StateSucceeded:
			m.Succeeded += e.Count
		case tessera.StateDead:
			m.Dead += e.Count
		case tessera.StateCanceled:
		default:
			m.Failed += e.Count
		}
	}
	out := &QueuesPage{Namespace: ns, Time: now, Queues: make([]QueueStats, 0, len(byName))}
	for _, q := range byName {
		out.Queues = append(out.Queues, *q)
	}
	slices.SortFunc(out.Queues, func(a, b QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}
