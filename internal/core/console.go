package core

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// What the operator console reads and does beyond the task and queue
// operations: a task's trail, a search of tasks by title and creation
// time, and changes of every task a filter selects.

// Console bounds.
const (
	// MaxBulk bounds the tasks one bulk change touches.
	MaxBulk = 1000
	// trailEvents bounds the events of a task's trail; trailScan the
	// namespace's audit events it looks at, newest first.
	trailEvents = 500
	trailScan   = 20_000
	// maxSearchLen bounds the title text searched for.
	maxSearchLen = 200
)

// Trail is what happened to a task: the audit trail's events about it, or
// done under its leases (records and blobs its runs wrote), of the last
// 24 h, oldest first; and its claim events (notes, cancel requests,
// lapses), which live as long as the task.
type Trail struct {
	TaskID string  `json:"task_id"`
	Events []Event `json:"events"`
	// Since is how far back Events reach: the task's creation or the
	// audit window's start, whichever is later.
	Since time.Time           `json:"since"`
	Notes []tessera.TaskEvent `json:"notes"`
}

// TaskTrail returns a task's trail. The trail looks at the namespace's
// newest 20,000 audit events since the task was made, so its cost is
// bounded however busy the namespace.
func (s *Service) TaskTrail(ctx context.Context, a *auth.Actor, ns, id string) (*Trail, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskTrail)
	if err != nil {
		return nil, err
	}
	out := &Trail{TaskID: id, Events: []Event{}, Notes: []tessera.TaskEvent{}}
	err = s.auditedRead(ctx, a, ns, ActTaskTrail, func(tx store.Tx, ev *tessera.AuditEvent) error {
		task, err := tx.TaskGet(ctx, ns, id)
		if err != nil {
			return notFound(err, "task", id)
		}
		ev.Target = id
		out.Since = s.clock.Now().Add(-AuditWindow)
		if task.CreatedAt.After(out.Since) {
			out.Since = task.CreatedAt
		}
		events, err := tx.AuditStream(ctx, store.StreamFilter{Namespace: ns, After: tessera.IDFloor(out.Since), Actions: streamActions,
			TaskID: id, Scan: trailScan, Limit: trailEvents})
		if err != nil {
			return err
		}
		out.Events = out.Events[:0]
		for i := range events {
			out.Events = append(out.Events, eventOf(&events[i], false))
		}
		notes, err := tx.TaskEventList(ctx, ns, id, 0, trailEvents)
		out.Notes = append(out.Notes[:0], notes...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Selection is what a console filter selects: tasks of a queue, in a
// state a client sees, whose title holds some text, made within a time
// range.
type Selection struct {
	Queue         string     `json:"queue,omitempty"`
	State         string     `json:"state,omitempty"`
	Title         string     `json:"title,omitempty"`
	CreatedAfter  *time.Time `json:"created_after,omitempty"`
	CreatedBefore *time.Time `json:"created_before,omitempty"`
}

func (Selection) Bounds() input.Bounds {
	return input.Bounds{
		"queue":          input.Match(input.NameFormat).Doc("only tasks of this queue"),
		"state":          input.Enum(tessera.States...).Doc("only tasks in this state"),
		"title":          input.Line(0, maxSearchLen).Doc("only tasks whose title contains this text (ASCII letters in any case)"),
		"created_after":  input.Bound{}.Doc("only tasks made at or after this RFC 3339 time"),
		"created_before": input.Bound{}.Doc("only tasks made before this RFC 3339 time"),
	}
}

// searches reports whether sel asks for more than TaskList can tell.
func (sel *Selection) searches() bool {
	return sel.Title != "" || sel.CreatedAfter != nil || sel.CreatedBefore != nil
}

// search is sel as a store search at now, within states (stored states;
// nil: any) and below the id before ("" for none). ok is false when sel's
// state is none of states: nothing is selected.
func (sel *Selection) search(now time.Time, states []string, before string, limit int) (f store.TaskSearch, ok bool) {
	f = store.TaskSearch{States: states, Queue: sel.Queue, Title: sel.Title, Before: before, Limit: limit}
	if sel.State != "" {
		sf := tessera.StoredFilter(sel.State, now)
		if states != nil && !slices.Contains(states, sf.State) {
			return f, false
		}
		f.States, f.RunAtUpTo, f.RunAtAfter = []string{sf.State}, sf.RunAtUpTo, sf.RunAtAfter
	}
	if sel.CreatedAfter != nil {
		// An id made at or after the time is above its floor.
		f.After = tessera.IDFloor(*sel.CreatedAfter)
	}
	if sel.CreatedBefore != nil {
		if b := tessera.IDFloor(*sel.CreatedBefore); f.Before == "" || b < f.Before {
			f.Before = b
		}
	}
	return f, true
}

// searchTasks is ListTasks for a selection TaskList cannot make.
func searchTasks(ctx context.Context, tx store.Tx, ns string, sel *Selection, label, before string, limit int, now time.Time) ([]tessera.Task, error) {
	f, ok := sel.search(now, nil, before, limit)
	if !ok {
		return nil, nil
	}
	f.Label = label
	return tx.TaskSearch(ctx, ns, f)
}

// BulkParams is a change of every task a selection selects.
type BulkParams struct {
	Selection
	// Action is the change: retry (dead and canceled tasks) or cancel
	// (tasks not finished).
	Action string `json:"action"`
	// DryRun counts the tasks the change would touch, and changes none.
	DryRun bool `json:"dry_run,omitempty"`
	// Expect is the count a dry run answered: the change is made only if
	// the selection still counts as many, so what is confirmed is what
	// is changed.
	Expect *int `json:"expect,omitempty"`
}

func (BulkParams) Bounds() input.Bounds {
	return input.Bounds{
		"action":  input.Enum(string(ChangeRetry), string(ChangeCancel)).Doc("retry (dead and canceled tasks) or cancel (tasks not finished)"),
		"dry_run": input.Bound{}.Doc("count the tasks the change would touch, and change none"),
		"expect": input.Range(0, MaxBulk).Doc(fmt.Sprintf("the count a dry run answered (0–%d); required unless dry_run: "+
			"the change is made only if the selection still counts as many", MaxBulk)),
	}
}

// Bulk is a bulk change's answer.
type Bulk struct {
	Action string `json:"action"`
	DryRun bool   `json:"dry_run"`
	// Count is the tasks the selection holds that the change applies to,
	// at most MaxBulk: the newest of them when More.
	Count int  `json:"count"`
	More  bool `json:"more"`
	// Changed are the ids of the tasks changed (none on a dry run).
	Changed []string `json:"changed"`
}

// bulkStates are the stored states each change applies to.
var bulkStates = map[string][]string{
	string(ChangeRetry):  {tessera.StateDead, tessera.StateCanceled},
	string(ChangeCancel): {tessera.StateReady, tessera.StateLeased, tessera.StatePaused, tessera.StateWaiting, tessera.StateGated},
}

// BulkChange retries or cancels every task a selection selects, at most
// MaxBulk (the newest), in one transaction, after a dry run counted them:
// a change whose Expect is not the count now is refused (409
// version_conflict), so the operator changes what was confirmed. Each
// task changed gets its own event, as its single change would.
func (s *Service) BulkChange(ctx context.Context, a *auth.Actor, ns string, p BulkParams) (*Bulk, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskBulk)
	if err != nil {
		return nil, err
	}
	if !p.DryRun && p.Expect == nil {
		return nil, tessera.Invalid("expect", "expect the count a dry run answered (dry_run: true), or make one")
	}
	out := &Bulk{Action: p.Action, DryRun: p.DryRun, Changed: []string{}}
	if p.DryRun {
		err = s.auditedRead(ctx, a, ns, ActTaskBulk, func(tx store.Tx, ev *tessera.AuditEvent) error {
			ev.Target = "tasks"
			ids, more, err := bulkSelect(ctx, tx, ns, &p, s.clock.Now())
			out.Count, out.More = len(ids), more
			return err
		})
		return out, err
	}
	err = s.audited(ctx, a, ns, ActTaskBulk, func(tx store.Tx, ev *tessera.AuditEvent) error {
		now := ev.Time
		ev.Target = "tasks"
		selected, more, err := bulkSelect(ctx, tx, ns, &p, now)
		if err != nil {
			return err
		}
		out.Count, out.More, out.Changed = len(selected), more, out.Changed[:0]
		if len(selected) != *p.Expect {
			return tessera.Errorf(tessera.CodeVersionConflict, "the selection holds %d tasks to %s now, not the %d expected: count again (dry_run)",
				len(selected), p.Action, *p.Expect)
		}
		ipHash, _, err := s.ipHash(ctx, tx, now) // a fresh salt is remembered by act, which reads it again
		if err != nil {
			return err
		}
		action := "task." + p.Action
		// The children the changed tasks settle share one budget: what is
		// over it is left to the settling worker, as one change's would be.
		settle := &budget{left: settleBatch}
		for i, id := range selected {
			task, err := tx.TaskGet(ctx, ns, id)
			if err != nil {
				return err
			}
			if err := s.applyChange(ctx, tx, a, task, TaskChange(p.Action), now, false, settle); err != nil {
				return err
			}
			out.Changed = append(out.Changed, id)
			// Each task's event is the one its own change would write;
			// the action's own event becomes the last task's.
			te := ev
			if i < len(selected)-1 {
				te = &tessera.AuditEvent{Namespace: ns, PrincipalID: ev.PrincipalID, KeyID: ev.KeyID, IPHash: ipHash, Time: now, Status: 200}
			}
			te.ID, te.Action, te.Target, te.Public = ids.New(now), action, id, task.Public
			if task.Lease != nil {
				te.RunID = task.Lease.RunID
			}
			if te != ev {
				if err := tx.AuditInsert(ctx, te); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bulkSelect returns the ids of the tasks p selects that its change
// applies to, newest first, at most MaxBulk, and whether more are
// selected. It reads a page at a time and keeps only ids, so a selection
// of tasks with large briefs holds no more than a listing does.
func bulkSelect(ctx context.Context, tx store.Tx, ns string, p *BulkParams, now time.Time) ([]string, bool, error) {
	var selected []string
	before := ""
	for {
		want := MaxBulk + 1 - len(selected)
		f, ok := p.search(now, bulkStates[p.Action], before, want)
		if !ok {
			return nil, false, nil
		}
		page, err := tx.TaskSearch(ctx, ns, f)
		if err != nil {
			return nil, false, err
		}
		for _, t := range page {
			selected = append(selected, t.ID)
		}
		if len(page) == 0 || len(selected) > MaxBulk {
			break
		}
		// A short page is the end, unless it stopped at its byte budget
		// (store.CutPage): then the next one starts below it.
		if _, more := store.CutPage(len(page), want, func(i int) int { return page[i].ValueBytes() }); !more && len(page) < want {
			break
		}
		before = page[len(page)-1].ID
	}
	if len(selected) > MaxBulk {
		return selected[:MaxBulk], true, nil
	}
	return selected, false, nil
}
