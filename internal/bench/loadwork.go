package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// The calls a worker makes, each with its own latency histogram.
type callKind int

const (
	callEnqueue callKind = iota
	callClaim
	callHeartbeat
	callSubmit
	callEnqueueBatch
	numCalls
)

var callNames = [numCalls]string{"enqueue", "claim", "heartbeat", "submit", "enqueue_batch"}

const (
	benchQueue = "bench"
	// leaseSeconds is long enough that no lease lapses while a run goes
	// on a slow machine: a lapse would be a second lease of the task.
	leaseSeconds = 120
	// lifecycleWait is the claim long-poll while the run goes: the task
	// a worker just enqueued may have been taken by another, whose own
	// comes a moment later.
	lifecycleWait = 5
	// errorPause keeps a worker whose calls fail from spinning.
	errorPause = 20 * time.Millisecond
	// callAttempts is how often a call that may be repeated safely
	// (heartbeat, submit with its Idempotency-Key, a refused claim) is
	// sent before the worker gives up on it.
	callAttempts = 4
)

// callStats are one worker's latencies and failures in one phase.
type callStats struct {
	lat      [numCalls]histogram
	errs     [numCalls]int64
	firstErr [numCalls]string
	// empty counts claims answered 204 (nothing ready).
	empty int64
}

func (s *callStats) fail(k callKind, err error) {
	s.errs[k]++
	if s.firstErr[k] == "" {
		s.firstErr[k] = err.Error()
	}
}

func (s *callStats) merge(o *callStats) {
	for k := range numCalls {
		s.lat[k].merge(&o.lat[k])
		s.errs[k] += o.errs[k]
		if s.firstErr[k] == "" {
			s.firstErr[k] = o.firstErr[k]
		}
	}
	s.empty += o.empty
}

func (s *callStats) failures() int64 {
	var n int64
	for _, e := range s.errs {
		n += e
	}
	return n
}

// taskSeen is what one worker saw of a task: an acknowledged enqueue,
// the claims granted to it and the submits that succeeded.
type taskSeen struct {
	enqueued        bool
	claims, submits uint16
}

// worker is one load-generating client with its own key.
type worker struct {
	id     int
	c      *client.Client // in the bench namespace, on its node
	key    string
	public bool
	// heartbeat: the worker heartbeats each task it claimed before it
	// submits it.
	heartbeat bool
	// batch, above 1, is how many tasks a work-off claim asks for.
	batch int
	seq   int
	seen  map[string]taskSeen
	st    *callStats
	// unsure counts tasks a failed enqueue may still have created.
	unsure int
	// first is the first task enqueued: its answer is what the no-op
	// baseline answers.
	first *client.Task
}

func (w *worker) note(id string, f func(*taskSeen)) {
	s := w.seen[id]
	f(&s)
	w.seen[id] = s
}

// enqueueRequest is the same size every time, so the no-op baseline can
// send exactly what the load sends.
func (w *worker) enqueueRequest() client.EnqueueRequest {
	w.seq++
	return client.EnqueueRequest{Queue: benchQueue, Title: "bench load", Public: w.public,
		Payload: json.RawMessage(fmt.Sprintf(`{"worker":"%04d","seq":"%010d"}`, w.id, w.seq))}
}

// phase is one timed part of the run, shared by its workers.
type phase struct {
	stop atomic.Bool
	// giveUp is when a claim that keeps finding nothing stops looking
	// (unix nanoseconds; 0: never), set when the phase stops.
	giveUp atomic.Int64
	// done counts tasks submitted as succeeded in this phase.
	done atomic.Int64
	// alive reports whether every server is still up.
	alive func() bool
}

func (p *phase) running(ctx context.Context) bool {
	return !p.stop.Load() && ctx.Err() == nil && p.alive()
}

// end stops the phase; claims still waiting keep looking for grace.
func (p *phase) end(grace time.Duration) {
	p.giveUp.Store(time.Now().Add(grace).UnixNano())
	p.stop.Store(true)
}

func (p *phase) pastGiveUp() bool {
	g := p.giveUp.Load()
	return g != 0 && time.Now().UnixNano() > g
}

// refusedWithoutActing is a 429 or 503: the server did nothing, so any
// call may be sent again.
func refusedWithoutActing(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable)
}

// mayRepeat reports whether a call that cannot act twice is worth
// sending again: refused, or lost in transport; not a definite answer.
func mayRepeat(err error) bool {
	var e *client.Error
	return refusedWithoutActing(err) || !errors.As(err, &e)
}

// lifecycles runs enqueue → claim → heartbeat → submit until the phase
// stops; every iteration is finished, so no lease is left behind.
func (w *worker) lifecycles(ctx context.Context, p *phase) {
	for p.running(ctx) {
		if !w.enqueue(ctx) {
			pause(ctx, errorPause)
			continue
		}
		w.work(ctx, p, lifecycleWait, false)
	}
}

// workOff claims → heartbeats → submits until a claim finds nothing
// ready (the backlog is worked off) or the phase stops.
func (w *worker) workOff(ctx context.Context, p *phase) {
	for p.running(ctx) {
		var empty bool
		if w.batch > 1 {
			empty = w.workBatch(ctx, p)
		} else {
			_, empty = w.work(ctx, p, 0, true)
		}
		if empty {
			return
		}
	}
}

// workBatch claims up to w.batch tasks in one call and ends them in one
// batch submit. It reports whether the claim found the queue empty.
func (w *worker) workBatch(ctx context.Context, p *phase) (empty bool) {
	var claims []client.Claim
	ok := w.repeat(ctx, callClaim, func() error {
		var none *client.Empty
		var err error
		claims, none, err = w.c.ClaimN(ctx, client.ClaimRequest{Queue: benchQueue, LeaseSeconds: leaseSeconds}, w.batch)
		if none != nil {
			w.st.empty++
		}
		if err != nil && !refusedWithoutActing(err) {
			return errGiveUp{err} // a lost answer may have granted leases: not repeated
		}
		return err
	})
	if !ok || len(claims) == 0 {
		return ok
	}
	req := client.SubmitBatchRequest{Items: make([]client.SubmitItem, len(claims)), IdempotencyKey: "bench-" + claims[0].Task.ID}
	for i, cl := range claims {
		w.note(cl.Task.ID, func(s *taskSeen) { s.claims++ })
		if w.heartbeat {
			w.repeat(ctx, callHeartbeat, func() error {
				_, err := w.c.Heartbeat(ctx, cl.Task.ID, client.HeartbeatRequest{LeaseToken: cl.Lease.Token})
				return err
			})
		}
		req.Items[i] = client.SubmitItem{TaskID: cl.Task.ID, SubmitRequest: client.SubmitRequest{LeaseToken: cl.Lease.Token,
			Outcome: client.OutcomeSucceeded, Result: json.RawMessage(`{"ok":true}`)}}
	}
	var results []client.SubmitResult
	if !w.repeat(ctx, callSubmit, func() (err error) { results, err = w.c.SubmitBatch(ctx, req); return err }) {
		return false
	}
	for _, r := range results {
		if r.Err != nil {
			w.st.fail(callSubmit, r.Err)
			continue
		}
		w.note(r.TaskID, func(s *taskSeen) { s.submits++ })
		p.done.Add(1)
	}
	return false
}

// errGiveUp is an error repeat must not send again.
type errGiveUp struct{ error }

func (e errGiveUp) Unwrap() error { return e.error }

func (w *worker) enqueue(ctx context.Context) bool {
	start := time.Now()
	t, err := w.c.Enqueue(ctx, w.enqueueRequest())
	if err != nil {
		w.st.fail(callEnqueue, err)
		w.unsure++
		return false
	}
	w.st.lat[callEnqueue].record(time.Since(start))
	if w.first == nil {
		w.first = t
	}
	w.note(t.ID, func(s *taskSeen) { s.enqueued = true })
	return true
}

// work claims one task and finishes it. It reports whether a task was
// done, and whether the claim found the queue empty (only asked when
// untilEmpty; otherwise it keeps polling until the phase gives up).
func (w *worker) work(ctx context.Context, p *phase, wait int, untilEmpty bool) (done, empty bool) {
	cl, empty := w.claim(ctx, p, wait, untilEmpty)
	if cl == nil {
		return false, empty
	}
	id, token := cl.Task.ID, cl.Lease.Token
	if w.heartbeat {
		w.repeat(ctx, callHeartbeat, func() error {
			_, err := w.c.Heartbeat(ctx, id, client.HeartbeatRequest{LeaseToken: token})
			return err
		})
	}
	// The same Idempotency-Key on every try: a repeat answers the first
	// submit instead of acting again.
	ok := w.repeat(ctx, callSubmit, func() error {
		_, err := w.c.Submit(ctx, id, client.SubmitRequest{LeaseToken: token, Outcome: client.OutcomeSucceeded,
			Result: json.RawMessage(`{"ok":true}`), IdempotencyKey: "bench-" + id})
		return err
	})
	if ok {
		w.note(id, func(s *taskSeen) { s.submits++ })
		p.done.Add(1)
	}
	return ok, false
}

// claim asks for a task until one is granted, the queue is empty (when
// untilEmpty), or the phase gives up. A claim whose answer was lost in
// transport is not repeated: its lease may have been granted.
func (w *worker) claim(ctx context.Context, p *phase, wait int, untilEmpty bool) (*client.Claim, bool) {
	for ctx.Err() == nil && p.alive() {
		start := time.Now()
		cl, _, err := w.c.Claim(ctx, client.ClaimRequest{Queue: benchQueue, LeaseSeconds: leaseSeconds, WaitSeconds: wait})
		switch {
		case err != nil:
			w.st.fail(callClaim, err)
			if !refusedWithoutActing(err) {
				return nil, false
			}
			pause(ctx, errorPause)
		case cl == nil:
			w.st.empty++
			if untilEmpty {
				return nil, true
			}
			if p.pastGiveUp() {
				return nil, false
			}
		default:
			w.st.lat[callClaim].record(time.Since(start))
			w.note(cl.Task.ID, func(s *taskSeen) { s.claims++ })
			return cl, false
		}
	}
	return nil, false
}

// repeat sends a call that cannot act twice up to callAttempts times,
// recording the latency of the try that succeeded and every failure.
func (w *worker) repeat(ctx context.Context, k callKind, call func() error) bool {
	for try := 1; ; try++ {
		start := time.Now()
		err := call()
		if err == nil {
			w.st.lat[k].record(time.Since(start))
			return true
		}
		w.st.fail(k, err)
		var giveUp errGiveUp
		if try == callAttempts || !mayRepeat(err) || errors.As(err, &giveUp) || ctx.Err() != nil {
			return false
		}
		pause(ctx, errorPause)
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
