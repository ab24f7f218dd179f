package postgres_test

// Races between transactions on several nodes, where PostgreSQL's READ
// COMMITTED (unlike SQLite's one writer) lets them interleave: retention
// beside a retry or a note, a record write beside a lapse and re-claim,
// and workers on two nodes while leases lapse under them.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/blobfs"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// insertFinished stores a task that ran once and died at at, with its run
// and one event.
func insertFinished(t *testing.T, db store.Store, id string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	err := db.Update(ctx, func(tx store.Tx) error {
		task := &tessera.Task{Namespace: "main", ID: id, Queue: "q", Title: "t", Labels: []string{},
			MaxAttempts: 1, State: tessera.StateReady, RunAt: at, CreatedBy: "p", CreatedAt: at, UpdatedAt: at}
		if err := tx.TaskInsert(ctx, task); err != nil {
			return err
		}
		leased, err := tx.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "q", Now: at,
			Lease: tessera.Lease{RunID: "run-" + id, Holder: "p", ExpiresAt: at.Add(time.Minute), Seconds: 60}})
		if err != nil {
			return err
		}
		dead := leased.Copy()
		dead.State, dead.Lease, dead.FinishedAt, dead.UpdatedAt = tessera.StateDead, nil, &at, at
		dead.Run.EndedAt, dead.Run.Outcome = &at, tessera.OutcomeFailed
		if err := tx.TaskUpdate(ctx, leased, dead); err != nil {
			return err
		}
		return tx.TaskEventAppend(ctx, "main", id, &tessera.TaskEvent{Kind: tessera.EventNote, Body: "hi", By: "p", Time: at})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// holdUpdate runs fn in a transaction on db and keeps it open until the
// returned release is called; it returns once fn has run.
func holdUpdate(t *testing.T, db store.Store, fn func(store.Tx) error) (release func() error) {
	t.Helper()
	ran, done := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- db.Update(context.Background(), func(tx store.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			close(ran)
			<-done
			return nil
		})
	}()
	select {
	case <-ran:
	case err := <-errc:
		t.Fatalf("held transaction: %v", err)
	}
	var once sync.Once
	release = func() error {
		once.Do(func() { close(done) })
		return <-errc
	}
	t.Cleanup(func() { once.Do(func() { close(done) }) })
	return release
}

// purge runs one retention batch of finished tasks older than before. It
// must not wait for a transaction another test step holds open.
func purge(t *testing.T, db store.Store, before time.Time) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := db.Update(ctx, func(tx store.Tx) (err error) {
		n, err = tx.TasksFinishedPurge(ctx, before, 500)
		return err
	}); err != nil {
		t.Fatalf("purge: %v", err)
	}
	return n
}

// taskRows counts a task's rows: the task, its runs and its events.
func taskRows(t *testing.T, url, id string) (tasks, runs, events int) {
	t.Helper()
	// A task's last run is on its row, earlier ones in runs.
	pgtest.SQL(t, url, fmt.Sprintf(`SELECT (SELECT count(*) FROM tasks WHERE id = '%[1]s'),
 (SELECT count(*) FROM runs WHERE task_id = '%[1]s') + (SELECT count(*) FROM tasks WHERE id = '%[1]s' AND run_id IS NOT NULL),
 (SELECT count(*) FROM task_events WHERE task_id = '%[1]s')`, id), &tasks, &runs, &events)
	return
}

// Retention picks a dead task while a retry of it (live again, not yet
// committed) holds its row. Deleting by id alone, the purge deleted the
// task once the retry committed, with its runs and events; it now locks
// what it deletes and leaves a held task for a later pass.
func TestPurgeSkipsATaskRetriedMeanwhile(t *testing.T) {
	url := pgtest.Schema(t)
	db := openDB(t, url+"&pool_max_conns=4", newMeter())
	ctx := context.Background()
	insertFinished(t, db, "01DEAD", now)
	release := holdUpdate(t, db, func(tx store.Tx) error {
		before, err := tx.TaskGet(ctx, "main", "01DEAD")
		if err != nil {
			return err
		}
		after, later := before.Copy(), now.Add(2*time.Hour)
		after.State, after.Attempts, after.RunAt, after.FinishedAt, after.UpdatedAt = tessera.StateReady, 0, later, nil, later
		return tx.TaskUpdate(ctx, before, after)
	})
	if n := purge(t, db, now.Add(time.Hour)); n != 0 {
		t.Errorf("the purge deleted %d tasks; the only finished one is being retried", n)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if n := purge(t, db, now.Add(time.Hour)); n != 0 {
		t.Errorf("a purge after the retry deleted %d tasks", n)
	}
	if tasks, runs, events := taskRows(t, url, "01DEAD"); tasks != 1 || runs != 1 || events != 1 {
		t.Errorf("the retried task has %d task rows, %d runs, %d events; want 1, 1, 1", tasks, runs, events)
	}
}

// A note added to a finished task while retention purges it: the purge
// used to delete the events it saw, then the task once the note
// committed, leaving the note's event with no task. Held, the task is
// left for a later pass, which takes it with every event.
func TestPurgeSkipsATaskGivenAnEventMeanwhile(t *testing.T) {
	url := pgtest.Schema(t)
	db := openDB(t, url+"&pool_max_conns=4", newMeter())
	ctx := context.Background()
	insertFinished(t, db, "01DONE", now)
	release := holdUpdate(t, db, func(tx store.Tx) error {
		return tx.TaskEventAppend(ctx, "main", "01DONE", &tessera.TaskEvent{Kind: tessera.EventNote, Body: "late", By: "p", Time: now})
	})
	if n := purge(t, db, now.Add(time.Hour)); n != 0 {
		t.Errorf("the purge deleted %d tasks while a note held the only one", n)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if n := purge(t, db, now.Add(time.Hour)); n != 1 {
		t.Errorf("the next purge deleted %d tasks, want 1", n)
	}
	var events int
	pgtest.SQL(t, url, `SELECT count(*) FROM task_events`, &events)
	if tasks, runs, _ := taskRows(t, url, "01DONE"); tasks != 0 || runs != 0 || events != 0 {
		t.Errorf("after the purge: %d task rows, %d runs, %d events left; want none", tasks, runs, events)
	}
}

// pauseStore calls hook, with the method's name, before every RecordHead
// and after every NamespaceSettingsGet of the transactions it runs: a
// test holds a transaction there, between a check and the write it
// allows.
type pauseStore struct {
	store.Store
	hook func(method string)
}

func (p pauseStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return p.Store.Update(ctx, func(tx store.Tx) error { return fn(pauseTx{Tx: tx, hook: p.hook}) })
}

type pauseTx struct {
	store.Tx
	hook func(method string)
}

func (t pauseTx) RecordHead(ctx context.Context, ns, bucket, key string) (int64, error) {
	t.hook("RecordHead")
	return t.Tx.RecordHead(ctx, ns, bucket, key)
}

func (t pauseTx) NamespaceSettingsGet(ctx context.Context, ns string) (*tessera.NamespaceSettings, error) {
	st, err := t.Tx.NamespaceSettingsGet(ctx, ns)
	t.hook("NamespaceSettingsGet")
	return st, err
}

// pauseOnce returns a hook that, once armed is closed, holds the first
// call of method until resume is closed, closing paused as it does.
func pauseOnce(method string, armed, paused, resume chan struct{}) func(string) {
	var once sync.Once
	return func(m string) {
		select {
		case <-armed:
			if m == method {
				once.Do(func() { close(paused); <-resume })
			}
		default:
		}
	}
}

// adminKey makes an admin key in st, as a server's first start does.
func adminKey(t *testing.T, st store.Store, clock tessera.Clock) string {
	t.Helper()
	key, err := core.CreateAdminKey(context.Background(), st, clock, "", "admin")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// node is one service on the shared schema.
type node struct {
	svc   *core.Service
	actor *auth.Actor
}

func newNode(t *testing.T, st store.Store, clock tessera.Clock, key string) *node {
	t.Helper()
	m := meter.New(clock)
	a := auth.NewAuthenticator(st, clock, time.Minute)
	cfg := core.DefaultConfig()
	cfg.RetainFinished = 0
	cfg.ClaimRate, cfg.ClaimBurst, cfg.ClaimConcurrency = 1e6, 1e6, 1000
	svc := core.New(st, a, m, clock, cfg)
	t.Cleanup(svc.Close)
	actor, err := a.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return &node{svc: svc, actor: actor}
}

// A record written under a lease holds the lease's task until it commits
// (store.Tx.TaskHold). Checked with a plain read, a write that checked the
// lease just before it expired committed after another node had lapsed
// and re-claimed the task, under a run that had ended (§3.5: a stale
// lease_token changes nothing). Now the lapse waits: while the write is
// held, a claim on the other node does not lapse the lease, and once the
// write commits, the lapse and re-claim follow it.
func TestRecordWriteHoldsTheLease(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	dbA := openDB(t, url, newMeter())
	dbB := openDB(t, url, newMeter())
	clock := tessera.NewManualClock(now)
	key := adminKey(t, dbA, clock)
	inCheck, resume := make(chan struct{}), make(chan struct{})
	armed := make(chan struct{})
	a := newNode(t, pauseStore{Store: dbA, hook: pauseOnce("RecordHead", armed, inCheck, resume)}, clock, key)
	b := newNode(t, dbB, clock, key)

	if _, err := a.svc.Enqueue(ctx, a.actor, "main", core.EnqueueParams{Queue: "q", Title: "t"}, ""); err != nil {
		t.Fatal(err)
	}
	first, err := a.svc.Claim(ctx, a.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10})
	if err != nil || first.Lease == nil {
		t.Fatalf("claim: %v %+v", err, first)
	}
	// Just before expiry the holder writes a record under its lease on
	// node A; the write is held between its lease check and its insert.
	clock.Advance(10*time.Second - time.Millisecond)
	close(armed)
	putDone := make(chan error, 1)
	var rec *tessera.Record
	go func() {
		var err error
		rec, err = a.svc.PutRecord(ctx, a.actor, "main", "b", "k", core.PutRecordParams{Value: json.RawMessage(`1`), LeaseToken: first.Lease.Token}, "")
		putDone <- err
	}()
	<-inCheck
	var resumeOnce sync.Once
	unpause := func() { resumeOnce.Do(func() { close(resume) }) }
	defer unpause()
	clock.Advance(time.Second)
	if c, err := b.svc.Claim(ctx, b.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10}); err != nil || c.Lease != nil {
		t.Fatalf("claim while the write holds the task: %v %+v", err, c)
	}
	var state string
	pgtest.SQL(t, url, `SELECT state FROM tasks`, &state)
	if state != tessera.StateLeased {
		t.Fatalf("the task is %s while a write under its lease is held; want leased", state)
	}
	unpause()
	if err := <-putDone; err != nil {
		t.Fatalf("record write under the lease: %v", err)
	}
	if rec.RunID != first.Lease.RunID {
		t.Errorf("the record names run %s, want %s", rec.RunID, first.Lease.RunID)
	}
	// Now the lapse goes through, and after the backoff a new run.
	if c, err := b.svc.Claim(ctx, b.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10}); err != nil || c.Lease != nil {
		t.Fatalf("claim that lapses: %v %+v", err, c)
	}
	clock.Advance(12 * time.Second)
	second, err := b.svc.Claim(ctx, b.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10})
	if err != nil || second.Lease == nil || second.Lease.RunID == first.Lease.RunID {
		t.Fatalf("second claim: %v %+v", err, second)
	}
	_, err = a.svc.PutRecord(ctx, a.actor, "main", "b", "k", core.PutRecordParams{Value: json.RawMessage(`2`), LeaseToken: first.Lease.Token}, "")
	if tessera.ErrorCode(err) != tessera.CodeLeaseLost {
		t.Errorf("record write with the first token after the re-claim: %v, want lease_lost", err)
	}
}

// The first upload of a namespace sets its raw-blob policy once (§7).
// Read and then written, two first uploads on two nodes each found no
// policy and each wrote its own: both answered 201, and the one that
// committed last decided the policy, over what the other was told. Now
// the later one runs again, finds the policy set, and is refused like any
// upload asking for another policy.
func TestFirstUploadsSetThePolicyOnce(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	dbA := openDB(t, url, newMeter())
	dbB := openDB(t, url, newMeter())
	clock := tessera.NewManualClock(now)
	key := adminKey(t, dbA, clock)
	checked, resume, armed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	a := newNode(t, pauseStore{Store: dbA, hook: pauseOnce("NamespaceSettingsGet", armed, checked, resume)}, clock, key)
	b := newNode(t, dbB, clock, key)
	for _, n := range []*node{a, b} {
		fs, err := blobfs.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		n.svc.SetBlobs(fs)
	}
	// The namespace exists, so neither upload waits on its creation.
	if _, err := b.svc.PutRecord(ctx, b.actor, "art", "b", "k", core.PutRecordParams{Value: json.RawMessage(`1`)}, ""); err != nil {
		t.Fatal(err)
	}
	declare := func(n *node, data, policy string) error {
		sum := sha256.Sum256([]byte(data))
		size := int64(len(data))
		_, err := n.svc.DeclareBlob(ctx, n.actor, "art", core.DeclareBlobParams{SHA256: hex.EncodeToString(sum[:]), Size: &size, RawPolicy: policy})
		return err
	}
	// A's first upload asks for private and is held just after it found
	// no policy; B's asks for namespace and commits meanwhile.
	close(armed)
	errA := make(chan error, 1)
	go func() { errA <- declare(a, "a", tessera.RawPrivate) }()
	<-checked
	if err := declare(b, "b", tessera.RawNamespace); err != nil {
		close(resume)
		t.Fatalf("B's first upload: %v", err)
	}
	close(resume)
	if err := <-errA; tessera.ErrorCode(err) != tessera.CodeInvalidState {
		t.Errorf("A's first upload asking for private after B's set namespace: %v, want invalid_state", err)
	}
	var policy string
	pgtest.SQL(t, url, `SELECT raw_policy FROM namespace_settings WHERE namespace = 'art'`, &policy)
	if policy != tessera.RawNamespace {
		t.Errorf("the policy is %s, want namespace, as the upload that set it was told", policy)
	}
}

// With no race, a record write with a lapsed and re-claimed lease's token
// is lease_lost.
func TestRecordWriteAfterReclaimIsLost(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	dbA := openDB(t, url, newMeter())
	clock := tessera.NewManualClock(now)
	key := adminKey(t, dbA, clock)
	a := newNode(t, dbA, clock, key)
	if _, err := a.svc.Enqueue(ctx, a.actor, "main", core.EnqueueParams{Queue: "q", Title: "t"}, ""); err != nil {
		t.Fatal(err)
	}
	first, err := a.svc.Claim(ctx, a.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10})
	if err != nil || first.Lease == nil {
		t.Fatalf("claim: %v", err)
	}
	clock.Advance(11 * time.Second)
	if _, err := a.svc.Claim(ctx, a.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(12 * time.Second)
	if c, err := a.svc.Claim(ctx, a.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10}); err != nil || c.Lease == nil {
		t.Fatalf("re-claim: %v %+v", err, c)
	}
	_, err = a.svc.PutRecord(ctx, a.actor, "main", "b", "k", core.PutRecordParams{Value: json.RawMessage(`1`), LeaseToken: first.Lease.Token}, "")
	if tessera.ErrorCode(err) != tessera.ErrorCode(tessera.ErrLeaseLost) {
		t.Errorf("record write with a stale token: %v, want lease_lost", err)
	}
}

// Two nodes, workers claiming, heartbeating and submitting while a shared
// clock runs ahead so leases lapse under them: every heartbeat and submit
// the service accepted was for its task's live run (the run's recorded
// outcome is what the submit said; no accepted heartbeat or submit belongs
// to a run that lapsed), a task never has two open runs, and the sharded
// counts equal the tasks' states.
func TestNodesLeasesUnderLapses(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	dbA := openDB(t, url+"&pool_max_conns=6", newMeter())
	dbB := openDB(t, url+"&pool_max_conns=6", newMeter())
	clock := tessera.NewManualClock(now)
	key := adminKey(t, dbA, clock)
	nodes := []*node{newNode(t, dbA, clock, key), newNode(t, dbB, clock, key)}
	const tasks = 12
	maxAttempts := 100
	for i := range tasks {
		if _, err := nodes[i%2].svc.Enqueue(ctx, nodes[0].actor, "main", core.EnqueueParams{Queue: "q", Title: fmt.Sprint("t", i), MaxAttempts: &maxAttempts}, ""); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var tick sync.WaitGroup
	tick.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				clock.Advance(2 * time.Second)
			}
		}
	})
	type accepted struct{ task, run, outcome string }
	var mu sync.Mutex
	var submits []accepted
	var beats int
	deadline := time.Now().Add(6 * time.Second)
	var wg sync.WaitGroup
	for w := range 6 {
		n := nodes[w%2]
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				c, err := n.svc.Claim(ctx, n.actor, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if c.Lease == nil {
					continue
				}
				id, tok := c.Lease.TaskID, c.Lease.Token
				for range i % 3 {
					_, err := n.svc.Heartbeat(ctx, n.actor, "main", id, core.HeartbeatParams{LeaseToken: tok})
					if err == nil {
						mu.Lock()
						beats++
						mu.Unlock()
					} else if tessera.ErrorCode(err) != tessera.CodeLeaseLost {
						t.Errorf("heartbeat: %v", err)
					}
				}
				outcome := tessera.OutcomeFailed
				if i%4 == 0 {
					outcome = tessera.OutcomeSucceeded
				}
				_, err = n.svc.Submit(ctx, n.actor, "main", id, core.SubmitParams{LeaseToken: tok, Outcome: outcome}, "")
				switch {
				case err == nil:
					mu.Lock()
					submits = append(submits, accepted{id, c.Lease.RunID, outcome})
					mu.Unlock()
				case tessera.ErrorCode(err) != tessera.CodeLeaseLost:
					t.Errorf("submit: %v", err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	tick.Wait()

	runs := map[string]tessera.Run{}
	err := dbA.View(ctx, func(tx store.Tx) error {
		all, err := tx.TaskList(ctx, "main", store.TaskFilter{Limit: 100})
		if err != nil {
			return err
		}
		for _, task := range all {
			rs, err := tx.RunList(ctx, "main", task.ID)
			if err != nil {
				return err
			}
			open := 0
			for _, r := range rs {
				runs[r.ID] = r
				if r.EndedAt == nil {
					open++
				}
			}
			if open > 1 || (open == 1) != (task.State == tessera.StateLeased) {
				t.Errorf("task %s (%s): %d open runs", task.ID, task.State, open)
			}
		}
		counts, err := tx.TaskStateCounts(ctx, "main", store.AllTasks)
		if err != nil {
			return err
		}
		counted, listed := map[string]int{}, map[string]int{}
		for _, c := range counts {
			if c.Count != 0 {
				counted[c.State] += c.Count
			}
		}
		for _, task := range all {
			listed[task.State]++
		}
		if fmt.Sprint(counted) != fmt.Sprint(listed) {
			t.Errorf("counts %v, tasks' states %v", counted, listed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lapsed := 0
	for _, r := range runs {
		if r.Outcome == tessera.OutcomeLapsed {
			lapsed++
		}
	}
	t.Logf("%d runs (%d lapsed), %d accepted submits, %d accepted heartbeats", len(runs), lapsed, len(submits), beats)
	if lapsed == 0 || len(submits) == 0 {
		t.Fatalf("%d lapses and %d accepted submits: the race this test is for did not happen", lapsed, len(submits))
	}
	for _, s := range submits {
		if r := runs[s.run]; r.Outcome != s.outcome {
			t.Errorf("submit %s of run %s (task %s) was accepted, but the run ended %q", s.outcome, s.run, s.task, r.Outcome)
		}
	}
}
