package core

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// What the core tells GET /metrics: the depth of every queue, and the
// runs that ended and the tasks that died since the process started.

// QueueDepth is one queue's health over all its tasks, public or not:
// counts by stored state (ready includes scheduled), leases live and
// expired-but-unnoticed, and the oldest ready age — what /v1/health says
// of public tasks.
type QueueDepth struct {
	Namespace string
	QueueHealth
	// ReadyByGroup is, of a queue with lanes (fleet.go), its ready tasks
	// (scheduled included) by group, bounded: the MetricsGroups groups
	// with the most get their own, the rest are summed under OtherGroups
	// (as is a group of that name). Nil for a queue without lanes.
	ReadyByGroup []GroupReady
}

// GroupReady is a queue's ready tasks of one group ("": tasks without
// one), for the metrics.
type GroupReady struct {
	Group string
	Ready int
}

// QueueDepths are every queue's depths as of Time.
type QueueDepths struct {
	Time   time.Time
	Queues []QueueDepth
	// Truncated says namespaces were left out: named ones past the first
	// MetricsNamespaces, or demo ones past the first MetricsNamespaces
	// summed into DemoNamespaces.
	Truncated bool
}

const (
	// MetricsNamespaces bounds the namespaces one pass reads, of named
	// namespaces and of demo ones each, so a server with many namespaces
	// keeps a bounded set of series and a bounded scrape.
	MetricsNamespaces = 256
	// DemoNamespaces is the one series every anonymous session's demo
	// namespace is summed into: thousands of them would crowd out the
	// namespaces an operator watches, and sort before main by name.
	DemoNamespaces = "demo-*"
	// depthsTTL is how long a pass serves: scrapers more frequent than
	// that (or several Prometheus servers) share one.
	depthsTTL = 5 * time.Second
	// MetricsGroups bounds the groups of one queue with series of their
	// own: the ones with the most ready tasks; OtherGroups sums the rest.
	MetricsGroups = 10
	OtherGroups   = "other"
)

// depthCache keeps the last pass.
type depthCache struct {
	mu   sync.Mutex
	last *QueueDepths
	at   time.Time
}

// QueueDepths returns the depth of every queue of the first
// MetricsNamespaces named namespaces by name, then the queues of the demo
// namespaces summed under DemoNamespaces, for GET /metrics. One read
// transaction lists them (store NamespaceList) and reads each one's health
// over all tasks (readHealth with store.AllTasks: TaskStateCounts,
// TaskLapsedCounts, TaskOldestReady), so a pass costs O(namespaces ×
// queues), never O(tasks). A pass is kept for depthsTTL.
func (s *Service) QueueDepths(ctx context.Context) (*QueueDepths, error) {
	s.depths.mu.Lock()
	defer s.depths.mu.Unlock()
	if s.depths.last != nil && time.Since(s.depths.at) < depthsTTL {
		return s.depths.last, nil
	}
	out := &QueueDepths{}
	err := s.store.View(ctx, func(tx store.Tx) error {
		out.Queues, out.Truncated = nil, false
		out.Time = s.clock.Now()
		named, demo, truncated, err := metricsNamespaces(ctx, tx)
		if err != nil {
			return err
		}
		out.Truncated = truncated
		for _, ns := range named {
			h, err := readHealth(ctx, tx, ns, out.Time, store.AllTasks)
			if err != nil {
				return err
			}
			groups, err := readyByGroup(ctx, tx, ns, out.Time, nil)
			if err != nil {
				return err
			}
			for _, q := range h.Queues {
				out.Queues = append(out.Queues, QueueDepth{Namespace: ns, QueueHealth: q, ReadyByGroup: topGroups(groups[q.Queue])})
			}
		}
		sum := map[string]*QueueDepth{}
		var queues []string
		demoGroups := map[string]map[string]int{}
		for _, ns := range demo {
			h, err := readHealth(ctx, tx, ns, out.Time, store.AllTasks)
			if err != nil {
				return err
			}
			if _, err := readyByGroup(ctx, tx, ns, out.Time, demoGroups); err != nil {
				return err
			}
			for _, q := range h.Queues {
				d := sum[q.Queue]
				if d == nil {
					d = &QueueDepth{Namespace: DemoNamespaces, QueueHealth: QueueHealth{Queue: q.Queue, Counts: map[string]int{}}}
					sum[q.Queue] = d
					queues = append(queues, q.Queue)
				}
				addHealth(&d.QueueHealth, q)
			}
		}
		slices.Sort(queues)
		for _, q := range queues {
			d := *sum[q]
			d.ReadyByGroup = topGroups(demoGroups[q])
			out.Queues = append(out.Queues, d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.depths.last, s.depths.at = out, time.Now()
	return out, nil
}

// metricsNamespaces lists the namespaces a pass reads: main, then the
// other named ones (all but the demo ones, by name), then the demo ones,
// at most MetricsNamespaces of each; truncated says some were left out.
// Demo names sort between "demo-" and "demo-~": the named ones are listed
// on both sides of that range, and the demo ones inside it.
func metricsNamespaces(ctx context.Context, tx store.Tx) (named, demo []string, truncated bool, err error) {
	const demoFirst, demoPast = "demo-", "demo-~"
	named = []string{tessera.MainNamespace}
	list := func(after string, until func(string) bool, into *[]string) error {
		for {
			page, err := tx.NamespaceList(ctx, after, 100)
			if err != nil {
				return err
			}
			for _, ns := range page {
				if until(ns.Name) {
					return nil
				}
				if ns.Name == tessera.MainNamespace {
					continue
				}
				if len(*into) == MetricsNamespaces {
					truncated = true
					return nil
				}
				*into = append(*into, ns.Name)
			}
			if len(page) < 100 {
				return nil
			}
			after = page[len(page)-1].Name
		}
	}
	if err = list("", func(n string) bool { return n >= demoFirst }, &named); err != nil {
		return
	}
	if err = list(demoPast, func(string) bool { return false }, &named); err != nil {
		return
	}
	err = list(demoFirst, func(n string) bool { return n >= demoPast }, &demo)
	return
}

// readyByGroup adds into into (made when nil) the ready tasks of each
// queue of ns that has lanes, by queue and group: a LaneList and a
// LaneReady of its lanes (lane 0's tasks are group ""), so a pass reads
// O(lanes + their ready tasks) of the fleet queues only. Lane 0 adds a
// group "" only when it holds ready tasks.
func readyByGroup(ctx context.Context, tx store.Tx, ns string, now time.Time, into map[string]map[string]int) (map[string]map[string]int, error) {
	if into == nil {
		into = map[string]map[string]int{}
	}
	queues, err := tx.QueuesFleet(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, q := range queues {
		lanes, err := tx.LaneList(ctx, ns, q)
		if err != nil {
			return nil, err
		}
		if len(lanes) == 0 {
			continue // settings only: no lane to count
		}
		ids := []int64{0}
		for _, l := range lanes {
			ids = append(ids, l.ID)
		}
		counts, err := tx.LaneReady(ctx, ns, q, ids, now)
		if err != nil {
			return nil, err
		}
		m := into[q]
		if m == nil {
			m = map[string]int{}
			into[q] = m
		}
		if n := counts[0].Ready; n > 0 {
			m[""] += n
		}
		for _, l := range lanes {
			m[l.Group] += counts[l.ID].Ready
		}
	}
	return into, nil
}

// topGroups bounds a queue's ready tasks by group: the MetricsGroups
// groups with the most (ties by name) as they are, then, when there are
// more, the rest summed under OtherGroups. A group named OtherGroups
// never takes a place of its own: its tasks are that series' too.
func topGroups(m map[string]int) []GroupReady {
	if m == nil {
		return nil
	}
	var out []GroupReady
	for g, n := range m {
		if g != OtherGroups {
			out = append(out, GroupReady{Group: g, Ready: n})
		}
	}
	slices.SortFunc(out, func(a, b GroupReady) int {
		if a.Ready != b.Ready {
			return b.Ready - a.Ready
		}
		return strings.Compare(a.Group, b.Group)
	})
	other, named := m[OtherGroups]
	if len(out) > MetricsGroups {
		for _, g := range out[MetricsGroups:] {
			other += g.Ready
		}
		out, named = out[:MetricsGroups], true
	}
	if named {
		out = append(out, GroupReady{Group: OtherGroups, Ready: other})
	}
	return out
}

// addHealth adds q's counts and leases into d, keeping the oldest ready
// age: the sum of one queue over several namespaces.
func addHealth(d *QueueHealth, q QueueHealth) {
	for st, n := range q.Counts {
		d.Counts[st] += n
	}
	d.LiveLeases += q.LiveLeases
	d.ExpiredLeases += q.ExpiredLeases
	if a := q.OldestReadyAgeSeconds; a != nil && (d.OldestReadyAgeSeconds == nil || *a > *d.OldestReadyAgeSeconds) {
		d.OldestReadyAgeSeconds = a
	}
}

// RunEnd names the runs of one queue that ended one way.
type RunEnd struct {
	Namespace, Queue, Outcome string
}

// RunTotals are the runs that ended (by outcome: succeeded, failed,
// lapsed, released, canceled) and the tasks that became dead, per
// queue, counted in this process since it started, as committed.
type RunTotals struct {
	Ended map[RunEnd]int64
	Dead  map[RunEnd]int64 // Outcome is the run's that killed the task
}

// runCounter counts committed run ends (statechange.go reports them).
type runCounter struct {
	mu          sync.Mutex
	ended, dead map[RunEnd]int64
}

// maxRunSeries bounds the queues counted apart; past it, the rest are
// counted under the namespace and queue "_other".
const maxRunSeries = 4096

func (c *runCounter) add(ns, queue, outcome, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == nil {
		c.ended, c.dead = map[RunEnd]int64{}, map[RunEnd]int64{}
	}
	if strings.HasPrefix(ns, "demo-") {
		ns = DemoNamespaces
	}
	k := RunEnd{Namespace: ns, Queue: queue, Outcome: outcome}
	if _, ok := c.ended[k]; !ok && len(c.ended) >= maxRunSeries {
		k.Namespace, k.Queue = "_other", "_other"
	}
	c.ended[k]++
	if state == tessera.StateDead {
		c.dead[k]++
	}
}

// RunTotals returns a copy of the counts.
func (s *Service) RunTotals() RunTotals {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	t := RunTotals{Ended: make(map[RunEnd]int64, len(s.runs.ended)), Dead: make(map[RunEnd]int64, len(s.runs.dead))}
	for k, v := range s.runs.ended {
		t.Ended[k] = v
	}
	for k, v := range s.runs.dead {
		t.Dead[k] = v
	}
	return t
}
