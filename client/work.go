package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Job is one claimed task, handed to a Handler. It is a struct, not the
// claim itself, so that what a worker is given can grow without changing
// Handler's signature (a claim is to carry the previous run's checkpoint).
type Job struct {
	// Task is the claimed task: its payload, brief, attempt number.
	Task *Task
	// Lease is the granted lease. Its Token binds records and blobs
	// written during the work to the run (PutRecordRequest.LeaseToken,
	// PutBlob's leaseToken).
	Lease *Lease
	// PreviousCheckpoint is what an earlier attempt at the task left to
	// resume from (Job.Checkpoint); nil when none did.
	PreviousCheckpoint *Checkpoint
	// GateAnswers are the answers to the gates the task waited on (an
	// earlier run's Job.Gate, or its enqueue's), by key; nil for a task
	// that had none. A decline is an answer too: the handler decides what
	// it means.
	GateAnswers map[string]GateAnswer
	// Parents are the ends (outcome, result) of the tasks this one was
	// enqueued after, for a task enqueued with ParentResults.
	Parents []ParentResult

	keeper *Keeper
}

// Progress sets the progress (any JSON value ≤ 4 KiB) the next heartbeat
// reports; see Keeper.Progress.
func (j *Job) Progress(v any) { j.keeper.Progress(v) }

// Checkpoint records what the work has done so far (any JSON value ≤ 64
// KiB) with the next heartbeat: should this run not finish, the next
// attempt starts with it as PreviousCheckpoint. See Keeper.Checkpoint.
func (j *Job) Checkpoint(v any) { j.keeper.Checkpoint(v) }

// Gate makes the handler's return park the task on gates — questions a
// person answers — rather than submit: `return job.Gate(spec, …)`. The
// run ends without using an attempt and no worker is held while the task
// waits; once every gate is answered (AnswerGate) or one times out, the
// task is claimed again and that run's handler reads the answers in
// GateAnswers. The last Checkpoint set goes with the gates, so that run
// resumes where this one stopped.
func (j *Job) Gate(specs ...GateSpec) (result any, err error) {
	return nil, &GateError{Gates: specs}
}

// Handler does one task's work. Its ctx ends when the task's cancel was
// requested (context.Cause is ErrCancelRequested), the lease was lost (the
// cause is the *Error), or Work's drain ran out (ErrDrained). What it
// returns is submitted: a nil error as succeeded with result as the
// result (any JSON value ≤ 256 KiB; nil is no result), an error as failed
// with its text (its first 4 KiB) as the error, to be retried while
// attempts are left; an error made by Cooldown also pauses the task's
// group. A panic is a failure too. A *GateError (Job.Gate), wrapped or
// not, submits nothing: the task is parked on its gates; should the
// server refuse them (a bad schema, a key used before), the run fails
// with why.
type Handler func(ctx context.Context, job *Job) (result any, err error)

// WorkOptions tune Work. The zero value is one handler at a time, with the
// server's default lease and a 30 s drain.
type WorkOptions struct {
	// Concurrency is how many handlers run at once (default 1). Work holds
	// no more tasks than that: it claims only when a handler is free.
	Concurrency int
	// LeaseSeconds is each claim's lease (10–3600; default the server's,
	// 300). The lease is kept alive while the handler runs, so a handler
	// may run longer; a shorter lease brings a crashed worker's tasks back
	// sooner, at the cost of more heartbeats (a third of it apart).
	LeaseSeconds int
	// Drain is how long handlers may go on after ctx ended before their
	// contexts are canceled and their tasks released (0: DefaultDrain;
	// negative: none, they are canceled at once).
	Drain time.Duration
	// MaxTasks makes Work claim that many tasks and return once they have
	// finished, however long they run (0: until ctx ends).
	MaxTasks int
	// Capabilities are shown with every claim (ClaimRequest.Capabilities):
	// only tasks whose requires are all among them are granted.
	Capabilities []string
	// Keep tunes each task's Keeper.
	Keep KeepOptions
}

// DefaultDrain is how long Work's handlers may finish after its ctx ended.
const DefaultDrain = 30 * time.Second

// MaxErrorBytes bounds a submitted error's text (the API's limit).
const MaxErrorBytes = 4 << 10

// ErrDrained is the cause of a handler's context when Work's drain ran
// out; Work then returns an error wrapping it.
var ErrDrained = errors.New("client: the worker's drain ran out")

// Work claims tasks of queue and runs handler for each, Concurrency at a
// time, until ctx ends (or MaxTasks were claimed): the claim → keep →
// submit loop of a worker. Each claim long-polls (WaitClaim), each task's
// lease is kept by a Keeper while its handler runs, and what the handler
// returns is submitted (see Handler). A task whose cancel was requested or
// whose lease was lost has nothing submitted: its handler's ctx ends, and
// the server has moved the task on.
//
// When ctx ends Work stops claiming at once and lets running handlers
// finish within Drain; then it cancels their contexts, releases their
// tasks (no attempt used; a handler that still returned a result has it
// submitted instead), and returns an error wrapping ErrDrained. Otherwise
// it returns nil once the running handlers finished, or, when claiming
// cannot go on (a bad key, a missing claim scope, an invalid queue name),
// that error, after they finished. Other claim failures are retried with
// backoff and logged. Handlers run on a context that keeps ctx's values
// but not its end.
func (c *Client) Work(ctx context.Context, queue string, handler Handler, opts WorkOptions) error {
	opts.Concurrency = max(opts.Concurrency, 1)
	if opts.Drain == 0 {
		opts.Drain = DefaultDrain
	}
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)
	// A worker says it is up, so a log shows it alive before its first task.
	c.log.Info("tessera: working", "queue", queue, "concurrency", opts.Concurrency, "lease_seconds", opts.LeaseSeconds,
		"capabilities", opts.Capabilities, "max_tasks", opts.MaxTasks)
	slots := make(chan struct{}, opts.Concurrency)
	var running sync.WaitGroup
	fatal := c.claimLoop(ctx, ClaimRequest{Queue: queue, LeaseSeconds: opts.LeaseSeconds, Capabilities: opts.Capabilities}, opts.MaxTasks, slots, func(cl *Claim) {
		running.Add(1)
		go func() {
			defer running.Done()
			defer func() { <-slots }()
			c.handle(work, cl, handler, opts.Keep)
		}()
	})

	finished := make(chan struct{})
	go func() { running.Wait(); close(finished) }()
	// The claim loop also ends at MaxTasks: that is no shutdown, and the
	// drain's clock starts only when one comes.
	select {
	case <-finished:
		return fatal
	case <-ctx.Done():
	}
	c.log.Info("tessera: draining", "running", len(slots), "drain", max(opts.Drain, 0))
	t := time.NewTimer(max(opts.Drain, 0))
	defer t.Stop()
	select {
	case <-finished:
		return fatal
	case <-t.C:
	}
	cut := len(slots)
	stopWork(ErrDrained)
	<-finished
	return errors.Join(fatal, fmt.Errorf("%w: %d task(s) cut short and released", ErrDrained, cut))
}

// claimLoop claims tasks whenever slots are free and hands each to start,
// until ctx ends, maxTasks were claimed, or claiming cannot go on. The
// slots free at once are claimed for together, in one batch claim.
func (c *Client) claimLoop(ctx context.Context, req ClaimRequest, maxTasks int, slots chan struct{}, start func(*Claim)) error {
	backoff := time.Second
	for claimed := 0; maxTasks == 0 || claimed < maxTasks; {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		want := 1 + takeFree(slots, min(MaxClaimBatch, cap(slots))-1)
		if maxTasks > 0 {
			for ; want > maxTasks-claimed; want-- {
				<-slots
			}
		}
		claims, err := c.waitClaimSome(ctx, req, want)
		for range want - len(claims) {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if IsUnauthorized(err) || IsForbidden(err) || ErrorCode(err) == CodeInvalidRequest {
				return fmt.Errorf("claim from %s: %w", req.Queue, err)
			}
			c.log.Warn("tessera: claim failed; trying again", "queue", req.Queue, "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
		for i := range claims {
			cl := &claims[i]
			claimed++
			c.log.Info("tessera: task claimed", "task", cl.Task.ID, "run", cl.Lease.RunID, "attempt", cl.Task.Attempts, "title", cl.Task.Title)
			start(cl)
		}
	}
	return nil
}

// takeFree takes up to n more slots that are free now, without waiting.
func takeFree(slots chan struct{}, n int) int {
	for taken := 0; taken < n; taken++ {
		select {
		case slots <- struct{}{}:
		default:
			return taken
		}
	}
	return n
}

// waitClaimSome long-polls for up to n tasks: one claim for one, a batch
// claim for more, unless the server has no batch route.
func (c *Client) waitClaimSome(ctx context.Context, req ClaimRequest, n int) ([]Claim, error) {
	if n > 1 && !c.shared.noBatchClaim.Load() {
		claims, err := c.WaitClaimN(ctx, req, n)
		if s := status(err); s != http.StatusNotFound && s != http.StatusMethodNotAllowed {
			return claims, err
		}
		c.shared.noBatchClaim.Store(true)
	}
	cl, err := c.WaitClaim(ctx, req)
	if cl == nil {
		return nil, err
	}
	return []Claim{*cl}, err
}

// handle runs the handler for one claimed task under a Keeper and ends the
// run as the handler's outcome and its context's cause decide.
func (c *Client) handle(work context.Context, cl *Claim, handler Handler, keep KeepOptions) {
	log := c.log.With("task", cl.Task.ID, "run", cl.Lease.RunID)
	work = WithTrace(work, cl.Task.Trace) // the run continues its producer's trace
	lease := c.Keep(work, cl, keep)
	defer lease.Stop()
	kept := lease.Claim()
	job := &Job{Task: &kept.Task, Lease: &kept.Lease, PreviousCheckpoint: kept.PreviousCheckpoint, GateAnswers: kept.GateAnswers, Parents: kept.Parents, keeper: lease}
	result, err := call(lease.Context(), handler, job, log)
	// Submits and releases are not cut short by the drain.
	ctx := context.WithoutCancel(work)
	var gate *GateError
	gated := errors.As(err, &gate)
	switch cause := context.Cause(lease.Context()); {
	case errors.Is(cause, ErrCancelRequested):
		log.Info("tessera: task canceled; nothing to submit")
		return
	// Gates are the handler's finished answer, as a result is: they are
	// opened after the drain ran out too.
	case errors.Is(cause, ErrDrained) && err != nil && !gated:
		if _, err := lease.Release(ctx); err != nil {
			log.Warn("tessera: release failed; the lease will lapse", "err", err)
			return
		}
		log.Info("tessera: drain ran out; task released")
		return
	case cause != nil && !errors.Is(cause, ErrDrained):
		log.Warn("tessera: lease lost; nothing submitted", "err", cause)
		return
	}
	if gated {
		if err = park(ctx, lease, gate, log); err == nil {
			return
		}
	}
	req := SubmitRequest{Outcome: OutcomeSucceeded, Result: result}
	if err != nil {
		// Cut to the API's bound, and made valid UTF-8 (which a cut in a
		// character, or the text itself, may not be) without growing.
		msg := err.Error()
		req = SubmitRequest{Outcome: OutcomeFailed, Error: strings.ToValidUTF8(msg[:min(len(msg), MaxErrorBytes)], "?")}
		// Only a group can cool down: a cooldown asked of a task without
		// one is a plain failure, not a refused submit.
		var cool *CooldownError
		if errors.As(err, &cool) && job.Task.Group != "" {
			req.CooldownSeconds = cool.seconds()
		}
	}
	task, err := lease.Submit(ctx, req)
	switch {
	case IsLeaseLost(err):
		log.Info("tessera: submit too late: the lease is over", "outcome", req.Outcome)
	case err != nil:
		log.Warn("tessera: submit failed; the lease will lapse", "outcome", req.Outcome, "err", err)
	default:
		log.Info("tessera: task submitted", "outcome", req.Outcome, "state", task.State)
	}
}

// park opens a handler's gates. It returns the error to fail the run with
// when they were refused: a run that meant to wait for a person must not
// pass for done, nor hold its task until the lease lapses.
func park(ctx context.Context, lease *Keeper, gate *GateError, log *slog.Logger) error {
	task, err := lease.OpenGates(ctx, GateRequest{Gates: gate.Gates})
	switch {
	case err == nil:
		log.Info("tessera: task parked on gates", "gates", gate.keys(), "state", task.State)
		return nil
	case IsLeaseLost(err):
		log.Info("tessera: gates too late: the lease is over", "gates", gate.keys())
		return nil
	}
	return fmt.Errorf("open gates %s: %w", strings.Join(gate.keys(), ", "), err)
}

// call runs the handler, turning a panic into a failure.
func call(ctx context.Context, handler Handler, job *Job, log *slog.Logger) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("tessera: handler panicked", "panic", p, "stack", string(debug.Stack()))
			result, err = nil, fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return handler(ctx, job)
}

// CooldownError is a handler's failure that also pauses the task's group
// for After (rounded up to a second, at most a day): say, an upstream
// that answered 429. Its ready tasks wait; the rest of the queue flows.
// Made by Cooldown.
type CooldownError struct {
	Err   error
	After time.Duration
}

// Cooldown makes err (the run's failure) a CooldownError that pauses the
// task's group for d; for a task without a group it is err alone.
func Cooldown(d time.Duration, err error) error { return &CooldownError{Err: err, After: d} }

func (e *CooldownError) Error() string { return e.Err.Error() }
func (e *CooldownError) Unwrap() error { return e.Err }

func (e *CooldownError) seconds() int {
	return min(int((e.After+time.Second-1)/time.Second), MaxCooldownSeconds)
}

// GateError is a handler's return that parks its task on Gates instead of
// submitting (Work). Made by Job.Gate; a handler may also return one,
// wrapped or not, from deep in its code.
type GateError struct {
	Gates []GateSpec
}

func (e *GateError) Error() string {
	return "client: the task waits on gates " + strings.Join(e.keys(), ", ")
}

func (e *GateError) keys() []string {
	keys := make([]string, len(e.Gates))
	for i, g := range e.Gates {
		keys[i] = g.Key
	}
	return keys
}

// MaxCooldownSeconds bounds a cooldown (the API's bound).
const MaxCooldownSeconds = 24 * 60 * 60
