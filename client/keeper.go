package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrCancelRequested is the cause of a Keeper's context when a cancel of
// the task was requested: the server has ended the run (outcome canceled),
// so the worker should stop and has nothing left to submit.
var ErrCancelRequested = errors.New("client: the task's cancel was requested")

// ErrKeeperStopped is the cause of a Keeper's context after Submit,
// Release, OpenGates or Stop.
var ErrKeeperStopped = errors.New("client: the lease keeper stopped")

// KeepOptions tune a Keeper.
type KeepOptions struct {
	// Interval between heartbeats; default a third of the lease, so two
	// may fail before the lease runs out.
	Interval time.Duration
	// NoEvents turns off the claim-events long-poll that lets a cancel
	// or a lapse be noticed at once rather than at the next heartbeat.
	NoEvents bool
}

// Keeper holds a granted lease: it heartbeats in the background and ends
// its context when the lease is over — with cause ErrCancelRequested when
// a cancel was requested, the *Error (lease_lost) when the lease was lost,
// ErrKeeperStopped after Submit, Release, OpenGates or Stop.
type Keeper struct {
	c      *Client
	claim  Claim
	opts   KeepOptions
	ctx    context.Context
	cancel context.CancelCauseFunc
	poke   chan struct{}
	done   chan struct{}

	mu        sync.Mutex
	progress  any
	gen, sent int // progress generation set, and sent by a heartbeat
	// checkpoint is sent by the next heartbeat, as progress is.
	checkpoint    any
	cpGen, cpSent int
	expiresAt     time.Time
	failures      int
	stopOnce      sync.Once
}

// Keep starts keeping cl's lease alive until ctx ends, the lease is over,
// or Submit, Release, OpenGates or Stop is called.
func (c *Client) Keep(ctx context.Context, cl *Claim, opts KeepOptions) *Keeper {
	if opts.Interval <= 0 {
		opts.Interval = time.Duration(max(cl.Lease.Seconds, 1)) * time.Second / 3
	}
	kctx, cancel := context.WithCancelCause(ctx)
	k := &Keeper{c: c, claim: *cl, opts: opts, ctx: kctx, cancel: cancel,
		poke: make(chan struct{}, 1), done: make(chan struct{}), expiresAt: cl.Lease.ExpiresAt}
	go k.heartbeats()
	if !opts.NoEvents {
		go k.watch()
	}
	return k
}

// Context is done when the lease is over or the keeper stopped;
// context.Cause says why.
func (k *Keeper) Context() context.Context { return k.ctx }

// Claim is the claim being kept.
func (k *Keeper) Claim() *Claim { return &k.claim }

// ExpiresAt is the lease's expiry as of the last heartbeat.
func (k *Keeper) ExpiresAt() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.expiresAt
}

// Failures counts heartbeats that failed without ending the lease.
func (k *Keeper) Failures() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failures
}

// Progress sets the progress (any JSON value ≤ 4 KiB) the next heartbeat
// reports, and asks for that heartbeat soon (at most one a second).
func (k *Keeper) Progress(v any) {
	k.mu.Lock()
	k.progress = v
	k.gen++
	k.mu.Unlock()
	k.wake()
}

// Checkpoint sets what the run has done so far (any JSON value ≤ 64 KiB),
// sent by the next heartbeat: should this run not finish, the next
// attempt's claim returns it as PreviousCheckpoint. The last one wins.
func (k *Keeper) Checkpoint(v any) {
	k.mu.Lock()
	k.checkpoint = v
	k.cpGen++
	k.mu.Unlock()
	k.wake()
}

func (k *Keeper) wake() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// Stop ends the heartbeats (the lease is left to run out) and waits for
// them to finish.
func (k *Keeper) Stop() {
	k.stopOnce.Do(func() { k.cancel(ErrKeeperStopped) })
	<-k.done
}

// Submit stops the heartbeats and submits the run's outcome with the
// lease's token. The submits of a client's keepers are coalesced: one made
// while another is in flight goes out with the others made meanwhile, in
// one batch submit (POST /v1/claims/submit), each item still fenced by
// its own token.
func (k *Keeper) Submit(ctx context.Context, req SubmitRequest) (*Task, error) {
	k.Stop()
	req.LeaseToken = k.claim.Lease.Token
	return k.c.submitterOf().submit(ctx, SubmitItem{TaskID: k.claim.Task.ID, SubmitRequest: req})
}

// Release stops the heartbeats and gives the task back.
func (k *Keeper) Release(ctx context.Context) (*Task, error) {
	return k.ReleaseWith(ctx, ReleaseRequest{})
}

// ReleaseWith is Release with the request's other fields (a cooldown of
// the task's group); the lease's token is filled in.
func (k *Keeper) ReleaseWith(ctx context.Context, req ReleaseRequest) (*Task, error) {
	k.Stop()
	req.LeaseToken = k.claim.Lease.Token
	return k.c.ReleaseWith(ctx, k.claim.Task.ID, req)
}

// OpenGates stops the heartbeats and parks the task on gates with the
// lease's token. Without req.Checkpoint it carries the last Checkpoint
// set, which the stopped heartbeats may not have sent: the run that
// follows the answers resumes from where this one got to.
func (k *Keeper) OpenGates(ctx context.Context, req GateRequest) (*Task, error) {
	k.Stop()
	req.LeaseToken = k.claim.Lease.Token
	k.mu.Lock()
	if req.Checkpoint == nil && k.cpGen > 0 {
		req.Checkpoint = k.checkpoint
	}
	k.mu.Unlock()
	return k.c.OpenGates(ctx, k.claim.Task.ID, req)
}

// minSpacing keeps progress reports from turning into a heartbeat storm.
const minSpacing = time.Second

func (k *Keeper) heartbeats() {
	defer close(k.done)
	next := k.opts.Interval
	var last time.Time // the first progress report goes at once
	for {
		t := time.NewTimer(next)
		select {
		case <-k.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-k.poke:
			t.Stop()
			if wait := minSpacing - time.Since(last); wait > 0 {
				if !sleep(k.ctx, wait) {
					return
				}
			}
		}
		last = time.Now()
		next = k.beat()
		if next < 0 {
			return
		}
	}
}

// beat sends one heartbeat and returns the wait before the next, or -1
// when the lease is over.
func (k *Keeper) beat() time.Duration {
	k.mu.Lock()
	gen, cpGen := k.gen, k.cpGen
	req := HeartbeatRequest{LeaseToken: k.claim.Lease.Token}
	if k.sent != gen {
		req.Progress = k.progress
	}
	if k.cpSent != cpGen {
		req.Checkpoint = k.checkpoint
	}
	k.mu.Unlock()
	hb, err := k.c.Heartbeat(k.ctx, k.claim.Task.ID, req)
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.ctx.Err() != nil:
		return -1
	case IsLeaseLost(err) || IsNotFound(err) || IsForbidden(err) || IsUnauthorized(err):
		k.cancel(err)
		return -1
	case err != nil:
		// The lease may still be alive: try again soon, well before it
		// runs out. Progress the server refused is dropped, or every
		// heartbeat after would carry it and fail.
		k.failures++
		if ErrorCode(err) == CodeInvalidRequest {
			k.sent, k.cpSent = gen, cpGen
		}
		return min(k.opts.Interval, max(time.Until(k.expiresAt)/4, 100*time.Millisecond))
	case hb.CancelRequested:
		k.cancel(ErrCancelRequested)
		return -1
	}
	if hb.ExpiresAt != nil {
		k.expiresAt = *hb.ExpiresAt
	}
	k.sent, k.cpSent = gen, cpGen
	return k.opts.Interval
}

// watch long-polls the task's claim events, and heartbeats at once when
// one says a cancel was requested or the lease ended, so the worker hears
// of it in about a second rather than at the next heartbeat.
func (k *Keeper) watch() {
	var since int64
	for k.ctx.Err() == nil {
		ev, err := k.c.ClaimEvents(k.ctx, k.claim.Task.ID, since, 30*time.Second)
		if err != nil {
			if ErrorCode(err) != "" && !IsUnavailable(err) && !IsRateLimited(err) {
				return // the heartbeats will find out what is wrong
			}
			if !sleep(k.ctx, 2*time.Second) {
				return
			}
			continue
		}
		since = ev.NextSince
		if ev.CancelRequested || ev.Lease == nil {
			k.wake()
			return
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
