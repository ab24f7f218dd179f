package core

import (
	"context"
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
}

// QueueDepths are every queue's depths as of Time.
type QueueDepths struct {
	Time   time.Time
	Queues []QueueDepth
	// Truncated says namespaces past the first MetricsNamespaces (by
	// name) were left out.
	Truncated bool
}

const (
	// MetricsNamespaces bounds the namespaces one pass reports, so a
	// server with many namespaces keeps a bounded set of series.
	MetricsNamespaces = 256
	// depthsTTL is how long a pass serves: scrapers more frequent than
	// that (or several Prometheus servers) share one.
	depthsTTL = 5 * time.Second
)

// depthCache keeps the last pass.
type depthCache struct {
	mu   sync.Mutex
	last *QueueDepths
	at   time.Time
}

// QueueDepths returns the depth of every queue of the first
// MetricsNamespaces namespaces by name, for GET /metrics. One read
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
		nss, err := tx.NamespaceList(ctx, "", MetricsNamespaces+1)
		if err != nil {
			return err
		}
		if len(nss) > MetricsNamespaces {
			out.Truncated = true
			nss = nss[:MetricsNamespaces]
		}
		for _, ns := range nss {
			h, err := readHealth(ctx, tx, ns.Name, out.Time, store.AllTasks)
			if err != nil {
				return err
			}
			for _, q := range h.Queues {
				out.Queues = append(out.Queues, QueueDepth{Namespace: ns.Name, QueueHealth: q})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.depths.last, s.depths.at = out, time.Now()
	return out, nil
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
