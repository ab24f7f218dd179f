package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// VerifyReport is the check, after the run, that the server kept every
// task exactly once: what the workers were told (every enqueue
// acknowledged, every claim granted, every submit accepted) against what
// the API says afterwards.
type VerifyReport struct {
	Pass bool `json:"pass"`
	// Enqueued are the tasks whose enqueue was acknowledged; Succeeded
	// those of them the server shows succeeded.
	Enqueued  int `json:"enqueued"`
	Succeeded int `json:"succeeded"`
	// Lost are acknowledged tasks that did not reach succeeded (or are
	// missing); LostStates counts them by the state the server shows.
	Lost       int            `json:"lost"`
	LostStates map[string]int `json:"lost_states,omitempty"`
	// Left are tasks of a backlog still waiting when --duration stopped
	// the work-off: not lost, only not reached.
	Left int `json:"left"`
	// SubmittedTwice: two accepted submits (client side) or two runs that
	// succeeded (server side). LeasedTwice: two granted claims (client
	// side) or more than one attempt or run (server side).
	SubmittedTwice int `json:"submitted_twice"`
	LeasedTwice    int `json:"leased_twice"`
	// Unacknowledged are tasks the server holds whose enqueue answer the
	// bench never got; at most one per failed enqueue (the batch's size
	// per failed batch) is explained.
	Unacknowledged int `json:"unacknowledged"`
	// FailedCalls is every call that failed (they are listed by kind in
	// the latency table); the verdict does not count them, the tasks do.
	FailedCalls int64 `json:"failed_calls"`
	// ServerListed is how many tasks the task listing returned;
	// RunsChecked how many were read one by one with their runs, chosen
	// as Sampling says.
	ServerListed int    `json:"server_listed"`
	RunsChecked  int    `json:"runs_checked"`
	Sampling     string `json:"sampling"`
	// Problems says in words why a run failed.
	Problems []string `json:"problems,omitempty"`
	// Examples are up to ten task ids of each problem.
	Examples map[string][]string `json:"examples,omitempty"`
}

// verifyLimits: below allRuns tasks each one's runs are read; above,
// the first sampleRuns and a random sampleRuns of the rest.
const (
	allRuns    = 10000
	sampleRuns = 5000
)

// verifyOptions say what the run knows besides its ledger.
type verifyOptions struct {
	// capped says --duration stopped a work-off, so waiting tasks never
	// claimed are left, not lost.
	capped bool
	// unsure is how many tasks failed enqueues may have made; failed
	// how many calls failed.
	unsure int
	failed int64
	// recheckFor is how long tasks not yet succeeded are looked at again
	// before they count as lost.
	recheckFor time.Duration
}

// serverTask is what the listing says of one task.
type serverTask struct {
	state    string
	attempts int
}

// verify compares the workers' ledgers with the server.
func verify(ctx context.Context, admin *client.Client, seen map[string]taskSeen, o verifyOptions) (*VerifyReport, error) {
	capped := o.capped
	rep := &VerifyReport{FailedCalls: o.failed, LostStates: map[string]int{}, Examples: map[string][]string{}}
	listed, order, err := listTasks(ctx, admin)
	if err != nil {
		return nil, err
	}
	rep.ServerListed = len(order)
	if err := recheck(ctx, admin, seen, listed, capped, o.recheckFor); err != nil {
		return nil, err
	}
	example := func(problem, id string) {
		if len(rep.Examples[problem]) < 10 {
			rep.Examples[problem] = append(rep.Examples[problem], id)
		}
	}
	twice := map[string]map[string]bool{"leased_twice": {}, "submitted_twice": {}}
	flag := func(problem, id string) {
		if !twice[problem][id] {
			twice[problem][id] = true
			example(problem, id)
		}
	}
	for id, s := range seen {
		if s.claims > 1 {
			flag("leased_twice", id)
		}
		if s.submits > 1 {
			flag("submitted_twice", id)
		}
		if !s.enqueued {
			continue
		}
		rep.Enqueued++
		t, ok := listed[id]
		switch {
		case ok && t.state == client.StateSucceeded:
			rep.Succeeded++
		case ok && capped && s.claims == 0 && (t.state == client.StateReady || t.state == client.StateScheduled):
			rep.Left++
		default:
			rep.Lost++
			state := t.state
			if !ok {
				state = "missing"
			}
			rep.LostStates[state]++
			example("lost", id)
		}
	}
	for _, id := range order {
		if !seen[id].enqueued {
			rep.Unacknowledged++
			example("unacknowledged", id)
		}
		if listed[id].attempts > 1 {
			flag("leased_twice", id)
		}
	}
	sample, how := sampleIDs(order)
	rep.Sampling = how
	runs, err := readRuns(ctx, admin, sample)
	if err != nil {
		return nil, err
	}
	rep.RunsChecked = len(sample)
	for id, t := range runs {
		succeeded := 0
		for _, r := range t.Runs {
			if r.Outcome == client.OutcomeSucceeded {
				succeeded++
			}
		}
		if succeeded > 1 {
			flag("submitted_twice", id)
		}
		if len(t.Runs) > 1 || t.Attempts > 1 {
			flag("leased_twice", id)
		}
		if t.State == client.StateSucceeded && succeeded == 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("task %s is succeeded without a succeeded run", id))
		}
	}
	rep.LeasedTwice, rep.SubmittedTwice = len(twice["leased_twice"]), len(twice["submitted_twice"])
	rep.judge(o.unsure)
	return rep, nil
}

func (rep *VerifyReport) judge(unsure int) {
	if rep.Lost > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("lost: %s acknowledged and not succeeded (by state: %v)", tasks(rep.Lost), rep.LostStates))
	}
	if rep.SubmittedTwice > 0 {
		rep.Problems = append(rep.Problems, "submitted twice: "+tasks(rep.SubmittedTwice))
	}
	if rep.LeasedTwice > 0 {
		rep.Problems = append(rep.Problems, "leased twice: "+tasks(rep.LeasedTwice))
	}
	if rep.Unacknowledged > unsure {
		rep.Problems = append(rep.Problems, fmt.Sprintf("unacknowledged: %s that no acknowledged enqueue made, and failed enqueues explain %d",
			tasks(rep.Unacknowledged), unsure))
	}
	if rep.Enqueued == 0 {
		rep.Problems = append(rep.Problems, "no task was enqueued")
	}
	rep.Pass = len(rep.Problems) == 0
}

func tasks(n int) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}

// listTasks reads every task of the bench queue, returning them by id
// and in enqueue order (the listing is newest first).
func listTasks(ctx context.Context, admin *client.Client) (map[string]serverTask, []string, error) {
	byID := map[string]serverTask{}
	var order []string
	f := client.TaskFilter{Queue: benchQueue, Limit: 200}
	for {
		page, err := admin.ListTasks(ctx, f)
		if err != nil {
			return nil, nil, fmt.Errorf("verify: list tasks: %w", err)
		}
		for _, t := range page.Tasks {
			if _, dup := byID[t.ID]; !dup {
				order = append(order, t.ID)
			}
			byID[t.ID] = serverTask{state: t.State, attempts: t.Attempts}
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
		order[i], order[j] = order[j], order[i]
	}
	return byID, order, nil
}

// recheck looks again, for up to wait, at acknowledged tasks the listing
// showed unfinished, so a read that raced the last submits does not count
// them lost.
func recheck(ctx context.Context, admin *client.Client, seen map[string]taskSeen, listed map[string]serverTask, capped bool, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var pending []string
		for id, s := range seen {
			t := listed[id]
			waiting := capped && s.claims == 0 && (t.state == client.StateReady || t.state == client.StateScheduled)
			if s.enqueued && t.state != client.StateSucceeded && !waiting {
				pending = append(pending, id)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) || len(pending) > 1000 {
			return nil
		}
		for _, id := range pending {
			t, err := admin.GetTask(ctx, id)
			switch {
			case client.IsNotFound(err):
				continue
			case err != nil:
				return fmt.Errorf("verify: get task %s: %w", id, err)
			}
			listed[id] = serverTask{state: t.State, attempts: t.Attempts}
		}
		pause(ctx, 500*time.Millisecond)
	}
}

// sampleIDs picks the tasks whose runs are read: all of them up to
// allRuns, else the first sampleRuns enqueued and a random sampleRuns of
// the rest.
func sampleIDs(order []string) ([]string, string) {
	if len(order) <= allRuns {
		return order, fmt.Sprintf("runs of all %d tasks", len(order))
	}
	rest := append([]string(nil), order[sampleRuns:]...)
	rand.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	ids := append(append([]string(nil), order[:sampleRuns]...), rest[:sampleRuns]...)
	return ids, fmt.Sprintf("runs of the first %d tasks and a random %d of the other %d", sampleRuns, sampleRuns, len(order)-sampleRuns)
}

// readRuns reads tasks one by one with their runs, eight at a time.
func readRuns(ctx context.Context, admin *client.Client, ids []string) (map[string]*client.Task, error) {
	out := make(map[string]*client.Task, len(ids))
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range jobs {
				t, err := admin.GetTask(ctx, id)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("verify: get task %s: %w", id, err)
				}
				if err == nil {
					out[id] = t
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		jobs <- id
	}
	close(jobs)
	wg.Wait()
	return out, firstErr
}
