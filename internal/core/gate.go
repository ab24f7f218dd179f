package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/elicit"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Gates (tessera.Gate): a run parks its task on gates and ends without
// using an attempt, or a producer enqueues a task with them; the task is
// gated, claimable by nobody, until every open gate is answered (by a key
// with enqueue, the MCP client that owns the task's handle, or the
// console) or one times out; then it is ready, and its claims carry the
// answers. Every node runs the timer (gateTimer): a timeout is recorded by
// whichever node's conditional write lands first, so it fires once.

// Gate bounds.
const (
	// MaxTaskGates bounds the gates a task has over its life, and so the
	// rows a claim of it reads for their answers.
	MaxTaskGates      = 16
	MaxGateMessageLen = 2 << 10
	MaxGateSchemaLen  = 16 << 10
	MaxGateURLLen     = 2 << 10
	MaxGateContentLen = 16 << 10
	// MaxGateTimeout bounds how long a gate may wait for its answer.
	MaxGateTimeout = 30 * 24 * time.Hour
)

// GateSpec is a gate as a run opens it or a producer enqueues it.
type GateSpec struct {
	Key     string `json:"key"`
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
	// Schema is a form's, in the MCP elicitation's restricted subset.
	Schema         json.RawMessage `json:"schema,omitempty"`
	URL            string          `json:"url,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	OnTimeout      string          `json:"on_timeout,omitempty"`
}

// GateParams is the body of POST /v1/claims/{task_id}/gate: one gate in
// its own fields, or several in gates, and what the run has done so far.
type GateParams struct {
	LeaseToken     string          `json:"lease_token"`
	Key            string          `json:"key,omitempty"`
	Kind           string          `json:"kind,omitempty"`
	Message        string          `json:"message,omitempty"`
	Schema         json.RawMessage `json:"schema,omitempty"`
	URL            string          `json:"url,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	OnTimeout      string          `json:"on_timeout,omitempty"`
	Gates          []GateSpec      `json:"gates,omitempty"`
	// Checkpoint goes with the task, as a heartbeat's would: the next
	// claim returns it as previous_checkpoint.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// specs are the gates p opens: its own fields' gate, or its list.
func (p *GateParams) specs() ([]GateSpec, error) {
	one := GateSpec{Key: p.Key, Kind: p.Kind, Message: p.Message, Schema: p.Schema, URL: p.URL,
		TimeoutSeconds: p.TimeoutSeconds, OnTimeout: p.OnTimeout}
	switch {
	case len(p.Gates) > 0 && one.Key != "":
		return nil, tessera.Invalid("gates", "give one gate in key, kind, message… or several in gates, not both")
	case len(p.Gates) > 0:
		return p.Gates, nil
	case one.Key == "":
		return nil, tessera.Invalid("key", "key is required: the gate's name, unique for the task's life")
	}
	return []GateSpec{one}, nil
}

// makeGates checks specs and makes them a task's gates, opened at now by
// run ("" at enqueue), after the task's earlier gates (had); list says
// they came in a list (gates), which an error's field names.
func makeGates(specs []GateSpec, list bool, had int, now time.Time, run string) ([]tessera.Gate, error) {
	if had+len(specs) > MaxTaskGates {
		return nil, tessera.Invalid("gates", "a task has at most %d gates over its life; it has had %d", MaxTaskGates, had)
	}
	out := make([]tessera.Gate, len(specs))
	for i := range specs {
		g, err := specs[i].gate(now, run)
		if err != nil {
			if list {
				return nil, inBatch("gates", i, err)
			}
			return nil, err
		}
		if slices.ContainsFunc(out[:i], func(o tessera.Gate) bool { return o.Key == g.Key }) {
			return nil, tessera.Invalid("key", "gate key %q is given twice", g.Key)
		}
		out[i] = g
	}
	return out, nil
}

// gate checks s (its bounds were checked by the decoder) and makes it a
// gate.
func (s *GateSpec) gate(now time.Time, run string) (tessera.Gate, error) {
	g := tessera.Gate{Key: s.Key, Kind: s.Kind, Message: s.Message, URL: s.URL, OnTimeout: s.OnTimeout, OpenedAt: now, RunID: run}
	if g.Message == "" {
		return g, tessera.Invalid("message", "message is required: what the person answering is asked")
	}
	if g.Kind == "" {
		switch {
		case s.URL != "":
			g.Kind = tessera.GateURL
		case s.Schema != nil:
			g.Kind = tessera.GateForm
		default:
			g.Kind = tessera.GateApproval
		}
	}
	switch g.Kind {
	case tessera.GateForm:
		if s.Schema == nil {
			return g, tessera.Invalid("schema", "a form gate needs the schema of its answer")
		}
		if _, err := elicit.Parse(s.Schema); err != nil {
			return g, tessera.Invalid("schema", "%v", err)
		}
		g.Schema = s.Schema
	case tessera.GateURL:
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return g, tessera.Invalid("url", "a url gate needs the http(s) URL the person is sent to")
		}
	case tessera.GateApproval:
	}
	if g.Kind != tessera.GateForm && s.Schema != nil {
		return g, tessera.Invalid("schema", "only a form gate has a schema")
	}
	if g.Kind != tessera.GateURL && s.URL != "" {
		return g, tessera.Invalid("url", "only a url gate has a url")
	}
	if s.TimeoutSeconds > 0 {
		at := now.Add(time.Duration(s.TimeoutSeconds) * time.Second)
		g.TimeoutAt = &at
	}
	if g.OnTimeout == "" {
		g.OnTimeout = tessera.OnTimeoutFail
	}
	return g, nil
}

// OpenGates parks a leased task on gates: the run ends without using an
// attempt, the lease is released, and the task is gated until its gates
// are answered. A cancel requested meanwhile wins: the task ends canceled
// and no gate opens.
func (s *Service) OpenGates(ctx context.Context, a *auth.Actor, ns, id string, p GateParams) (*tessera.Task, error) {
	a, err := s.authorize(ctx, a, ns, ActGateOpen)
	if err != nil {
		return nil, err
	}
	specs, err := p.specs()
	if err != nil {
		return nil, err
	}
	list := len(p.Gates) > 0
	var out *tessera.Task
	err = s.withLease(ctx, a, ns, id, p.LeaseToken, ActGateOpen, func(tx store.Tx, task *tessera.Task, now time.Time) error {
		out = task
		before := task.Copy()
		ev := tessera.OutcomeGated
		if task.CancelRequested {
			ev = tessera.OutcomeCanceled
		} else {
			gates, err := makeGates(specs, list, task.GateCount, now, task.Lease.RunID)
			if err != nil {
				return err
			}
			if err := s.addGates(ctx, tx, task, gates); err != nil {
				return err
			}
			task.GateCount += len(gates)
		}
		if p.Checkpoint != nil {
			c := &tessera.Checkpoint{Value: p.Checkpoint, Attempt: task.Attempts, RunID: task.Lease.RunID, At: now}
			if err := tx.CheckpointPut(ctx, ns, id, c); err != nil {
				return err
			}
		}
		return s.endLeaseFrom(ctx, tx, before, task, now, ev, "", nil)
	})
	if err != nil {
		return nil, err
	}
	out.Show(s.clock.Now())
	return out, nil
}

// addGates stores a task's new gates; a key the task used before is
// refused. Whoever follows the task hears of it, and a timeout wakes the
// gate timers.
func (s *Service) addGates(ctx context.Context, tx store.Tx, task *tessera.Task, gates []tessera.Gate) error {
	err := tx.GatesInsert(ctx, task.Namespace, task.ID, gates)
	if errors.Is(err, store.ErrConflict) {
		return tessera.Invalid("key", "a gate key is unique for the task's life, and one of these was used by this task before")
	}
	if err != nil {
		return err
	}
	tx.Notify(ctx, taskTopic(task.Namespace, task.ID))
	if slices.ContainsFunc(gates, func(g tessera.Gate) bool { return g.TimeoutAt != nil }) {
		tx.Notify(ctx, gateTimerTopic)
	}
	return nil
}

// GateAnswerParams is the body of POST /v1/tasks/{task_id}/gates/{key}.
type GateAnswerParams struct {
	Action string `json:"action"`
	// Content is a form's answer, checked against its schema.
	Content json.RawMessage `json:"content,omitempty"`
}

// AnswerGate answers an open gate of a gated task. When it was the last
// open one the task is ready (or scheduled, for a run_at ahead); a decline
// is an answer too: the worker decides what it means.
func (s *Service) AnswerGate(ctx context.Context, a *auth.Actor, ns, id, key string, p GateAnswerParams) (*tessera.Task, error) {
	a, err := s.authorize(ctx, a, ns, ActGateAnswer)
	if err != nil {
		return nil, err
	}
	var out *tessera.Task
	err = s.audited(ctx, a, ns, ActGateAnswer, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = id
		task, err := tx.TaskGet(ctx, ns, id)
		if err != nil {
			return notFound(err, "task", id)
		}
		ev.Public = task.Public
		gates, err := tx.GatesOf(ctx, ns, id)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(gates, func(g tessera.Gate) bool { return g.Key == key })
		if i < 0 {
			return tessera.NotFound("gate", key)
		}
		g := &gates[i]
		if !g.Open() {
			return tessera.Errorf(tessera.CodeInvalidState, "gate %s of task %s was already answered (%s)", key, id, g.Answer.Action)
		}
		if task.State != tessera.StateGated {
			return tessera.Errorf(tessera.CodeInvalidState, "task %s is %s: its gates are answered only while it is gated", id, task.VisibleState(ev.Time))
		}
		if err := checkAnswer(g, &p); err != nil {
			return err
		}
		answer := &tessera.GateAnswer{Action: p.Action, Content: p.Content, AnsweredBy: a.Principal.ID, At: ev.Time}
		if out, err = s.gateAnswered(ctx, tx, task, gates, i, answer, ev.Time); err != nil {
			return err
		}
		// Named here: an answer that leaves other gates open writes no
		// task for the event to be filled in from.
		ev.TaskID, ev.Queue, ev.State = out.ID, out.Queue, out.VisibleState(ev.Time)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Show(s.clock.Now())
	return out, nil
}

// checkAnswer holds an answer to what its gate asked: a form's accepted
// content to its schema; no content for anything else.
func checkAnswer(g *tessera.Gate, p *GateAnswerParams) error {
	if p.Action != tessera.GateAccept || g.Kind != tessera.GateForm {
		if p.Content != nil && string(p.Content) != "null" {
			return tessera.Invalid("content", "content answers a form gate that is accepted; this is a %s gate answered %s", g.Kind, p.Action)
		}
		p.Content = nil
		return nil
	}
	schema, err := elicit.Parse(g.Schema)
	if err != nil {
		return fmt.Errorf("gate %s: its stored schema: %w", g.Key, err)
	}
	if p.Content == nil {
		p.Content = json.RawMessage(`{}`)
	}
	if err := schema.Validate(p.Content); err != nil {
		return tessera.Invalid("content", "%v", err)
	}
	return nil
}

// gateAnswered records gates[i]'s answer (exactly once: the write is
// conditional on the gate being open) and moves the gated task on when
// that was its last open gate, or when a timeout fails it.
func (s *Service) gateAnswered(ctx context.Context, tx store.Tx, task *tessera.Task, gates []tessera.Gate, i int, answer *tessera.GateAnswer, now time.Time) (*tessera.Task, error) {
	g := &gates[i]
	if err := tx.GateAnswer(ctx, task.Namespace, task.ID, g.Key, answer); err != nil {
		return nil, err
	}
	g.Answer = answer
	before := task.Copy()
	switch {
	case answer.Action == tessera.GateTimeout && g.OnTimeout == tessera.OnTimeoutFail:
		task.State, task.FinishedAt = tessera.StateDead, &now
		task.Error = "gate " + g.Key + " timed out"
	case slices.ContainsFunc(gates, tessera.Gate.Open):
		// Others still wait: only whoever follows the task hears.
		tx.Notify(ctx, taskTopic(task.Namespace, task.ID))
		task.Gates = gates
		return task, nil
	default:
		task.State = tessera.StateReady
	}
	task.UpdatedAt = now
	if err := tx.TaskUpdate(ctx, before, task); err != nil {
		return nil, err
	}
	tx.Notify(ctx, taskTopic(task.Namespace, task.ID))
	if err := s.moved(ctx, tx, task, now, &budget{left: settleBatch}); err != nil {
		return nil, err
	}
	task.Gates = gates
	return task, nil
}

// gateTimerTopic wakes the gate timers: a gate with a timeout opened.
const gateTimerTopic = "g\x00"

// gateTimeoutBatch bounds the gates one pass of the timer times out.
const gateTimeoutBatch = 32

// TimeOutGates times out the open gates whose time has come, on any node;
// it returns when the next open gate times out (zero for none).
func (s *Service) TimeOutGates(ctx context.Context) (time.Time, error) {
	for {
		var due []tessera.Gate
		if err := s.store.View(ctx, func(tx store.Tx) error {
			var err error
			due, err = tx.GatesTimingOut(ctx, gateTimeoutBatch)
			return err
		}); err != nil {
			return time.Time{}, err
		}
		now := s.clock.Now()
		for i, g := range due {
			if g.TimeoutAt.After(now) {
				return *g.TimeoutAt, nil
			}
			if err := s.timeOut(ctx, &due[i]); err != nil && !errors.Is(err, store.ErrStale) {
				return time.Time{}, fmt.Errorf("time out gate %s of task %s: %w", g.Key, g.TaskID, err)
			}
		}
		if len(due) < gateTimeoutBatch {
			return time.Time{}, nil
		}
	}
}

// timeOut records a due gate's timeout, unless another node did, or its
// answer came first; the event is the gate's, made with no key.
func (s *Service) timeOut(ctx context.Context, due *tessera.Gate) error {
	return s.store.Update(ctx, func(tx store.Tx) error {
		now := s.clock.Now()
		task, err := tx.TaskGet(ctx, due.Namespace, due.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // purged meanwhile, and its gates before it
		}
		if err != nil {
			return err
		}
		gates, err := tx.GatesOf(ctx, due.Namespace, due.TaskID)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(gates, func(g tessera.Gate) bool { return g.Key == due.Key })
		if i < 0 || !gates[i].Open() {
			return nil // answered, or timed out by another node, meanwhile
		}
		answer := &tessera.GateAnswer{Action: tessera.GateTimeout, At: now}
		if task.State != tessera.StateGated {
			// Canceled (or retried) while gated: the gate is closed as
			// timed out, and the task stays as it is.
			return tx.GateAnswer(ctx, due.Namespace, due.TaskID, due.Key, answer)
		}
		if task, err = s.gateAnswered(ctx, tx, task, gates, i, answer, now); err != nil {
			return err
		}
		return tx.AuditInsert(ctx, &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: task.Namespace,
			Action: ActGateTimeout, Target: task.ID, TaskID: task.ID, Queue: task.Queue, State: task.VisibleState(now),
			Status: 200, Public: task.Public})
	})
}

// gateTimer times gates out until the service closes: it sleeps until the
// soonest open gate's timeout (at most a minute, for what another node's
// clock or a missed notification left), and wakes when a gate with a
// timeout opens on any node. Its first pass, 10 s after the start, times
// out what came due while no node ran.
func (s *Service) gateTimer() {
	wait := 10 * time.Second
	woken, unsubscribe := s.signals.subscribe(gateTimerTopic)
	for {
		timer := time.NewTimer(wait)
		select {
		case <-woken:
		case <-timer.C:
		case <-s.done:
			timer.Stop()
			unsubscribe()
			return
		}
		timer.Stop()
		unsubscribe()
		// Subscribed again before the pass, so a gate opened during it
		// wakes the next wait.
		woken, unsubscribe = s.signals.subscribe(gateTimerTopic)
		next, err := s.TimeOutGates(context.Background())
		wait = time.Minute
		switch {
		case err != nil:
			s.cfg.Log.Warn("timing out gates failed; tried again within a minute", "err", err)
		case !next.IsZero():
			wait = min(wait, max(next.Sub(s.clock.Now()), 10*time.Millisecond))
		}
	}
}

// gateAnswers are what a claim of task hands the worker: its gates'
// answers by key, for a task that had gates.
func gateAnswers(ctx context.Context, tx store.Tx, task *tessera.Task) (map[string]*tessera.GateAnswer, error) {
	if task.GateCount == 0 {
		return nil, nil
	}
	gates, err := tx.GatesOf(ctx, task.Namespace, task.ID)
	if err != nil {
		return nil, err
	}
	out := map[string]*tessera.GateAnswer{}
	for _, g := range gates {
		if g.Answer != nil {
			out[g.Key] = g.Answer
		}
	}
	return out, nil
}
