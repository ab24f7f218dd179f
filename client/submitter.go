package client

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// submitter coalesces the submits of one namespace's keepers: a submit
// made while none is in flight goes out at once, alone; those made while
// one is in flight wait for it and then go out together, as one batch
// submit (up to MaxClaimBatch items). An idle worker's submit waits for
// nothing, and a busy one's cost a request per batch instead of one each —
// the group commit the server does for its writes, done for its requests.
type submitter struct {
	c       *Client
	mu      sync.Mutex
	sending bool
	waiting []*pendingSubmit
}

type pendingSubmit struct {
	item SubmitItem
	done chan submitted
}

type submitted struct {
	task *Task
	err  error
}

// submitterOf is c's namespace's submitter.
func (c *Client) submitterOf() *submitter {
	s, _ := c.shared.submitters.LoadOrStore(c.namespace, &submitter{c: c})
	return s.(*submitter)
}

// submit ends item's run, alone or in a batch with others made meanwhile.
// A ctx that ends while the item waits returns at once, though the item
// may still be sent: as with a submit whose answer was lost, the lease
// then ends or lapses either way.
func (s *submitter) submit(ctx context.Context, item SubmitItem) (*Task, error) {
	s.mu.Lock()
	if s.sending {
		p := &pendingSubmit{item: item, done: make(chan submitted, 1)}
		s.waiting = append(s.waiting, p)
		s.mu.Unlock()
		select {
		case r := <-p.done:
			return r.task, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.sending = true
	s.mu.Unlock()
	task, err := s.c.Submit(ctx, item.TaskID, item.SubmitRequest)
	// What came in meanwhile goes out in batches, sent by this caller,
	// whose own answer is already known: a batch is not cut short by its
	// ctx, since other callers wait on it.
	go s.drain(context.WithoutCancel(ctx))
	return task, err
}

// drain sends the waiting submits in batches until none is left.
func (s *submitter) drain(ctx context.Context) {
	for {
		s.mu.Lock()
		n := min(len(s.waiting), MaxClaimBatch)
		if n == 0 {
			s.sending = false
			s.mu.Unlock()
			return
		}
		batch := s.waiting[:n:n]
		s.waiting = s.waiting[n:]
		s.mu.Unlock()
		s.send(ctx, batch)
	}
}

func (s *submitter) send(ctx context.Context, batch []*pendingSubmit) {
	if len(batch) == 1 || s.c.shared.noBatchSubmit.Load() {
		for _, p := range batch {
			task, err := s.c.Submit(ctx, p.item.TaskID, p.item.SubmitRequest)
			p.done <- submitted{task, err}
		}
		return
	}
	req := SubmitBatchRequest{Items: make([]SubmitItem, len(batch))}
	for i, p := range batch {
		req.Items[i] = p.item
	}
	results, err := s.c.SubmitBatch(ctx, req)
	if err == nil && len(results) != len(batch) {
		err = fmt.Errorf("client: a batch submit of %d items answered %d results", len(batch), len(results))
	}
	if status(err) == http.StatusNotFound || status(err) == http.StatusMethodNotAllowed {
		// A server without the batch route: one submit each, from now on.
		s.c.shared.noBatchSubmit.Store(true)
		s.send(ctx, batch)
		return
	}
	for i, p := range batch {
		switch {
		case err != nil:
			p.done <- submitted{nil, err}
		default:
			p.done <- submitted{results[i].Task, results[i].Err}
		}
	}
}
