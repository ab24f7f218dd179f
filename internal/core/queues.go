package core

import (
	"context"
	"sync"

	"github.com/tessera-dev/tessera/internal/store"
)

// queueMemory remembers which queues have had a task, so an empty claim
// can say whether its queue was ever used: a claim on a misspelled queue
// or namespace answers empty forever, and the hint is how a worker learns
// of the typo. A queue is looked up in the store the first time a claim
// finds it empty (its counts, O(queues of the namespace)); the answer is
// kept, and an enqueue's notification marks the queue known on every
// node. A gap in the notifications forgets the queues thought unknown.
type queueMemory struct {
	mu    sync.Mutex
	known map[string]bool // queue topic → has had a task
}

func newQueueMemory() *queueMemory { return &queueMemory{known: map[string]bool{}} }

// enqueued marks topic's queue known.
func (m *queueMemory) enqueued(topic string) {
	m.mu.Lock()
	if len(m.known) >= maxRemembered {
		clear(m.known)
	}
	m.known[topic] = true
	m.mu.Unlock()
}

// gap forgets the queues thought unknown: an enqueue may have gone unheard.
func (m *queueMemory) gap() {
	m.mu.Lock()
	for t, known := range m.known {
		if !known {
			delete(m.known, t)
		}
	}
	m.mu.Unlock()
}

// queueKnown reports whether queue of namespace ns has ever had a task.
// A store that cannot say is taken to know it: the hint is advice, and a
// claim is not refused for want of it.
func (s *Service) queueKnown(ctx context.Context, ns, queue string) bool {
	topic := queueTopic(ns, queue)
	m := s.queues
	m.mu.Lock()
	known, ok := m.known[topic]
	m.mu.Unlock()
	if ok {
		return known
	}
	known = true
	err := s.store.View(ctx, func(tx store.Tx) error {
		counts, err := tx.TaskStateCounts(ctx, ns, store.AllTasks)
		if err != nil {
			return err
		}
		known = false
		for _, c := range counts {
			if c.Queue == queue {
				known = true
			}
		}
		return nil
	})
	if err != nil {
		return true
	}
	m.mu.Lock()
	if len(m.known) >= maxRemembered {
		clear(m.known)
	}
	if !m.known[topic] { // an enqueue heard meanwhile wins
		m.known[topic] = known
	}
	m.mu.Unlock()
	return known
}
