package httpapi_test

import (
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// The task states of SPEC §1, driven over HTTP, with the manual clock
// standing in for lease and backoff time.

func TestStateReadyLeasedSucceeded(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")

	task := s.enqueue("main", producer, map[string]any{})
	if task.State != tessera.StateReady {
		t.Fatalf("enqueued: %s", task.State)
	}
	c := s.claim("main", worker, "default")
	if got := s.task("main", producer, task.ID); got.State != tessera.StateLeased || got.Attempts != 1 || got.Lease == nil || got.Lease.Token != "" {
		t.Fatalf("after claim: state %s attempts %d lease %+v (the token must not be shown)", got.State, got.Attempts, got.Lease)
	}
	if done := s.submit("main", worker, c, "succeeded"); done.State != tessera.StateSucceeded {
		t.Fatalf("submit: %s", done.State)
	}
	got := s.task("main", producer, task.ID)
	if got.State != tessera.StateSucceeded || got.Lease != nil || len(got.Runs) != 1 || got.Runs[0].Outcome != tessera.OutcomeSucceeded {
		t.Fatalf("after submit: %+v", got)
	}
	s.emptyClaim("main", worker, "default")
}

// A failed submit backs off 10 s (+ ≤ 10 % jitter), then 20 s, then the
// task is dead; retry brings it back with its attempts reset.
func TestStateFailedBackoffDeadRetry(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", producer, map[string]any{"max_attempts": 3})

	steps := []struct {
		attempt int
		backoff time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}}
	for _, st := range steps {
		c := s.claim("main", worker, "default")
		if c.Task.ID != task.ID || c.Task.Attempts != st.attempt {
			t.Fatalf("attempt %d: claimed %s with attempts %d", st.attempt, c.Task.ID, c.Task.Attempts)
		}
		now := s.Clock.Now()
		failed := s.submit("main", worker, c, "failed")
		if failed.State != tessera.StateScheduled || failed.Attempts != st.attempt {
			t.Fatalf("attempt %d failed: state %s attempts %d", st.attempt, failed.State, failed.Attempts)
		}
		within(t, "run_at", failed.RunAt, now.Add(st.backoff), now.Add(st.backoff+st.backoff/10))
		if got := s.task("main", producer, task.ID); got.State != tessera.StateScheduled || !got.RunAt.Equal(failed.RunAt) {
			t.Fatalf("attempt %d: read back %s run_at %s", st.attempt, got.State, got.RunAt)
		}
		// Not claimable during the backoff, even just before it ends.
		s.Clock.Set(failed.RunAt.Add(-time.Millisecond))
		s.emptyClaim("main", worker, "default")
		s.Clock.Set(failed.RunAt)
		if got := s.task("main", producer, task.ID); got.State != tessera.StateReady {
			t.Fatalf("attempt %d: backoff over, state %s", st.attempt, got.State)
		}
	}

	c := s.claim("main", worker, "default")
	if c.Task.Attempts != 3 {
		t.Fatalf("third claim attempts %d", c.Task.Attempts)
	}
	if dead := s.submit("main", worker, c, "failed"); dead.State != tessera.StateDead || dead.Attempts != 3 {
		t.Fatalf("attempts exhausted: state %s attempts %d", dead.State, dead.Attempts)
	}
	s.Clock.Advance(2 * time.Hour)
	s.emptyClaim("main", worker, "default")
	got := s.task("main", producer, task.ID)
	if got.State != tessera.StateDead || len(got.Runs) != 3 {
		t.Fatalf("dead task: state %s runs %d", got.State, len(got.Runs))
	}
	for i, r := range got.Runs {
		if r.Attempt != i+1 || r.Outcome != tessera.OutcomeFailed || r.EndedAt == nil {
			t.Fatalf("run %d: %+v", i, r)
		}
	}

	var retried tessera.Task
	s.must(200, "POST", "/v1/tasks/"+task.ID+"/retry", producer, nil).decode(t, &retried)
	if retried.State != tessera.StateReady || retried.Attempts != 0 {
		t.Fatalf("retry: state %s attempts %d", retried.State, retried.Attempts)
	}
	if c := s.claim("main", worker, "default"); c.Task.ID != task.ID || c.Task.Attempts != 1 {
		t.Fatalf("claim after retry: %s attempts %d", c.Task.ID, c.Task.Attempts)
	}
}

func TestStatePauseResume(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")

	// ready → paused → ready
	ready := s.enqueue("main", producer, map[string]any{})
	var paused tessera.Task
	s.must(200, "POST", "/v1/tasks/"+ready.ID+"/pause", producer, nil).decode(t, &paused)
	if paused.State != tessera.StatePaused {
		t.Fatalf("pause ready: %s", paused.State)
	}
	s.emptyClaim("main", worker, "default")
	if got := s.task("main", producer, ready.ID); got.State != tessera.StatePaused {
		t.Fatalf("paused task read back as %s", got.State)
	}
	var resumed tessera.Task
	s.must(200, "POST", "/v1/tasks/"+ready.ID+"/resume", producer, nil).decode(t, &resumed)
	if resumed.State != tessera.StateReady {
		t.Fatalf("resume: %s", resumed.State)
	}
	if c := s.claim("main", worker, "default"); c.Task.ID != ready.ID {
		t.Fatalf("claimed %s after resume, want %s", c.Task.ID, ready.ID)
	}

	// scheduled → paused: a paused task is not claimable even once its
	// run_at has passed; resumed, it is ready.
	runAt := s.Clock.Now().Add(time.Minute)
	sched := s.enqueue("main", producer, map[string]any{"queue": "later", "run_at": runAt})
	if sched.State != tessera.StateScheduled {
		t.Fatalf("future run_at: %s", sched.State)
	}
	s.must(200, "POST", "/v1/tasks/"+sched.ID+"/pause", producer, nil).decode(t, &paused)
	if paused.State != tessera.StatePaused {
		t.Fatalf("pause scheduled: %s", paused.State)
	}
	s.Clock.Advance(2 * time.Minute)
	s.emptyClaim("main", worker, "later")
	if got := s.task("main", producer, sched.ID); got.State != tessera.StatePaused {
		t.Fatalf("paused past its run_at: %s", got.State)
	}
	s.must(200, "POST", "/v1/tasks/"+sched.ID+"/resume", producer, nil).decode(t, &resumed)
	if resumed.State != tessera.StateReady {
		t.Fatalf("resume scheduled: %s", resumed.State)
	}
	if c := s.claim("main", worker, "later"); c.Task.ID != sched.ID {
		t.Fatalf("claimed %s, want %s", c.Task.ID, sched.ID)
	}
}

func TestStateCancel(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")

	// ready, scheduled and paused tasks are canceled at once.
	ready := s.enqueue("main", producer, map[string]any{})
	sched := s.enqueue("main", producer, map[string]any{"run_at": s.Clock.Now().Add(time.Hour)})
	paused := s.enqueue("main", producer, map[string]any{})
	s.must(200, "POST", "/v1/tasks/"+paused.ID+"/pause", producer, nil)
	for _, id := range []string{ready.ID, sched.ID, paused.ID} {
		var got tessera.Task
		s.must(200, "POST", "/v1/tasks/"+id+"/cancel", producer, nil).decode(t, &got)
		if got.State != tessera.StateCanceled {
			t.Fatalf("cancel: %s", got.State)
		}
	}
	s.Clock.Advance(2 * time.Hour)
	s.emptyClaim("main", worker, "default")

	// A leased task: cancel is requested, the holder learns it at its next
	// heartbeat, which ends the run; the token is then dead.
	leased := s.enqueue("main", producer, map[string]any{})
	c := s.claim("main", worker, "default")
	var req tessera.Task
	s.must(200, "POST", "/v1/tasks/"+leased.ID+"/cancel", producer, nil).decode(t, &req)
	if req.State != tessera.StateLeased || !req.CancelRequested {
		t.Fatalf("cancel of leased: state %s cancel_requested %v", req.State, req.CancelRequested)
	}
	var hb struct {
		State           string     `json:"state"`
		CancelRequested bool       `json:"cancel_requested"`
		ExpiresAt       *time.Time `json:"expires_at"`
	}
	s.must(200, "POST", "/v1/claims/"+leased.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token}).decode(t, &hb)
	if !hb.CancelRequested || hb.State != tessera.StateCanceled || hb.ExpiresAt != nil {
		t.Fatalf("heartbeat after cancel: %+v", hb)
	}
	wantError(t, s.do("POST", "/v1/claims/"+leased.ID+"/submit", worker,
		map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"}), 409, "lease_lost", "")
	got := s.task("main", producer, leased.ID)
	if got.State != tessera.StateCanceled || got.Lease != nil || len(got.Runs) != 1 || got.Runs[0].Outcome != tessera.OutcomeCanceled {
		t.Fatalf("canceled task: %+v", got)
	}

	// A canceled task may be retried.
	var retried tessera.Task
	s.must(200, "POST", "/v1/tasks/"+leased.ID+"/retry", producer, nil).decode(t, &retried)
	if retried.State != tessera.StateReady || retried.Attempts != 0 || retried.CancelRequested {
		t.Fatalf("retry of canceled: %+v", retried)
	}
}

// A cancel requested while leased also ends the task when the holder
// submits instead of heartbeating, or when the lease lapses.
func TestStateCancelRequestedEndsAtSubmitAndLapse(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")

	a := s.enqueue("main", producer, map[string]any{"queue": "a"})
	ca := s.claim("main", worker, "a")
	s.must(200, "POST", "/v1/tasks/"+a.ID+"/cancel", producer, nil)
	if got := s.submit("main", worker, ca, "succeeded"); got.State != tessera.StateCanceled {
		t.Fatalf("submit after cancel request: %s", got.State)
	}

	b := s.enqueue("main", producer, map[string]any{"queue": "b"})
	var cb claimed
	s.must(200, "POST", "/v1/claims", worker, map[string]any{"queue": "b", "lease_seconds": 10}).decode(t, &cb)
	s.must(200, "POST", "/v1/tasks/"+b.ID+"/cancel", producer, nil)
	s.Clock.Advance(11 * time.Second)
	s.emptyClaim("main", worker, "b")
	if got := s.task("main", producer, b.ID); got.State != tessera.StateCanceled {
		t.Fatalf("lapse after cancel request: %s", got.State)
	}
}

func TestStateInvalidTransitions(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")

	ready := s.enqueue("main", producer, map[string]any{"queue": "r"})
	leased := s.enqueue("main", producer, map[string]any{"queue": "l"})
	s.claim("main", worker, "l")
	done := s.enqueue("main", producer, map[string]any{"queue": "d"})
	s.submit("main", worker, s.claim("main", worker, "d"), "succeeded")
	canceled := s.enqueue("main", producer, map[string]any{"queue": "c"})
	s.must(200, "POST", "/v1/tasks/"+canceled.ID+"/cancel", producer, nil)

	cases := []struct {
		id, verb string
	}{
		{ready.ID, "resume"}, {ready.ID, "retry"},
		{leased.ID, "pause"}, {leased.ID, "resume"}, {leased.ID, "retry"},
		{done.ID, "pause"}, {done.ID, "resume"}, {done.ID, "cancel"}, {done.ID, "retry"},
		{canceled.ID, "cancel"}, {canceled.ID, "pause"}, {canceled.ID, "resume"},
	}
	for _, tc := range cases {
		before := s.task("main", producer, tc.id)
		wantError(t, s.change("main", producer, tc.id, tc.verb), 409, "invalid_state", "")
		after := s.task("main", producer, tc.id)
		if after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("%s of a %s task changed it: %s → %s", tc.verb, before.State, before.State, after.State)
		}
	}
}

func TestStateReleaseGivesAttemptBack(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", producer, map[string]any{"max_attempts": 1})

	// max_attempts 1: were the attempt not given back, the second claim
	// would find a task with no attempts left.
	for i := 0; i < 3; i++ {
		c := s.claim("main", worker, "default")
		if c.Task.Attempts != 1 {
			t.Fatalf("claim %d: attempts %d", i, c.Task.Attempts)
		}
		var rel tessera.Task
		s.must(200, "POST", "/v1/claims/"+task.ID+"/release", worker, map[string]any{"lease_token": c.Lease.Token}).decode(t, &rel)
		if rel.State != tessera.StateReady || rel.Attempts != 0 {
			t.Fatalf("release %d: state %s attempts %d", i, rel.State, rel.Attempts)
		}
		// The released token is dead.
		wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token}), 409, "lease_lost", "")
	}
	got := s.task("main", producer, task.ID)
	if got.State != tessera.StateReady || got.Attempts != 0 || len(got.Runs) != 3 || got.Runs[2].Outcome != tessera.OutcomeReleased {
		t.Fatalf("after releases: %+v", got)
	}
}

// A lease is live strictly before expires_at. Past it the holder's
// heartbeat and submit answer lease_lost, and the task has used its attempt.
func TestStateLapsedLeaseSeenByHolder(t *testing.T) {
	for _, verb := range []string{"heartbeat", "submit", "release"} {
		t.Run(verb, func(t *testing.T) {
			s := newTestServer(t)
			producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
			worker, _ := s.newKey("agent", "namespace:main", "claim")
			task := s.enqueue("main", producer, map[string]any{"max_attempts": 2})

			var c claimed
			s.must(200, "POST", "/v1/claims", worker, map[string]any{"lease_seconds": 10}).decode(t, &c)
			if want := s.Clock.Now().Add(10 * time.Second); !c.Lease.ExpiresAt.Equal(want) {
				t.Fatalf("expires_at %s, want %s", c.Lease.ExpiresAt, want)
			}
			body := map[string]any{"lease_token": c.Lease.Token}
			if verb == "submit" {
				body["outcome"] = "succeeded"
			}
			s.Clock.Set(c.Lease.ExpiresAt)
			lapsedAt := s.Clock.Now()
			wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/"+verb, worker, body), 409, "lease_lost", "")
			got := s.task("main", producer, task.ID)
			if got.State != tessera.StateScheduled || got.Attempts != 1 || got.Lease != nil {
				t.Fatalf("after lapse: state %s attempts %d lease %v", got.State, got.Attempts, got.Lease)
			}
			within(t, "run_at", got.RunAt, lapsedAt.Add(10*time.Second), lapsedAt.Add(11*time.Second))
			if len(got.Runs) != 1 || got.Runs[0].Outcome != tessera.OutcomeLapsed {
				t.Fatalf("runs: %+v", got.Runs)
			}

			// The second and last attempt lapses too: dead.
			s.Clock.Set(got.RunAt)
			s.must(200, "POST", "/v1/claims", worker, map[string]any{"lease_seconds": 10}).decode(t, &c)
			s.Clock.Advance(time.Hour)
			body["lease_token"] = c.Lease.Token
			wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/"+verb, worker, body), 409, "lease_lost", "")
			if got := s.task("main", producer, task.ID); got.State != tessera.StateDead || got.Attempts != 2 {
				t.Fatalf("second lapse: state %s attempts %d", got.State, got.Attempts)
			}
		})
	}
}

// Nobody has to call the holder's routes: the next claim on the queue
// notices a lapsed lease.
func TestStateLapsedLeaseSeenByNextClaim(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	w1, _ := s.newKey("agent", "namespace:main", "claim")
	w2, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", producer, map[string]any{})
	once := s.enqueue("main", producer, map[string]any{"queue": "once", "max_attempts": 1})

	var c claimed
	s.must(200, "POST", "/v1/claims", w1, map[string]any{"lease_seconds": 10}).decode(t, &c)
	var c1 claimed
	s.must(200, "POST", "/v1/claims", w1, map[string]any{"queue": "once", "lease_seconds": 10}).decode(t, &c1)
	s.Clock.Advance(10*time.Second + time.Millisecond)

	// Listing does not notice (it only shows); a claim does.
	if got := s.task("main", producer, task.ID); got.State != tessera.StateLeased {
		t.Fatalf("before the next claim: %s", got.State)
	}
	s.emptyClaim("main", w2, "default")
	got := s.task("main", producer, task.ID)
	if got.State != tessera.StateScheduled || got.Attempts != 1 || len(got.Runs) != 1 || got.Runs[0].Outcome != tessera.OutcomeLapsed {
		t.Fatalf("after the next claim: %+v", got)
	}
	s.Clock.Set(got.RunAt)
	if c2 := s.claim("main", w2, "default"); c2.Task.ID != task.ID || c2.Task.Attempts != 2 {
		t.Fatalf("re-claim: %s attempts %d", c2.Task.ID, c2.Task.Attempts)
	}
	// The first holder's token stays dead.
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/heartbeat", w1, map[string]any{"lease_token": c.Lease.Token}), 409, "lease_lost", "")

	s.emptyClaim("main", w2, "once")
	if got := s.task("main", producer, once.ID); got.State != tessera.StateDead {
		t.Fatalf("lapse of the last attempt: %s", got.State)
	}
}

func TestStateWrongLeaseTokenChangesNothing(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", producer, map[string]any{})
	c := s.claim("main", worker, "default")
	before := s.task("main", producer, task.ID)

	s.Clock.Advance(time.Second)
	for _, tok := range []string{"wrong", c.Lease.Token + "x", "", repeat("a", 200)} {
		for _, verb := range []string{"heartbeat", "submit", "release"} {
			body := map[string]any{"lease_token": tok}
			if verb == "submit" {
				body["outcome"] = "failed"
			}
			wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/"+verb, worker, body), 409, "lease_lost", "")
		}
	}
	after := s.task("main", producer, task.ID)
	if after.State != tessera.StateLeased || after.Attempts != before.Attempts || !after.UpdatedAt.Equal(before.UpdatedAt) ||
		after.Lease == nil || !after.Lease.ExpiresAt.Equal(before.Lease.ExpiresAt) || len(after.Runs) != 1 || after.Runs[0].EndedAt != nil {
		t.Fatalf("a wrong token changed the task:\nbefore %+v\nafter  %+v", before, after)
	}
	// The right token still works.
	if done := s.submit("main", worker, c, "succeeded"); done.State != tessera.StateSucceeded {
		t.Fatalf("submit with the right token: %s", done.State)
	}
}

// Heartbeat renews by the lease's own length unless told otherwise.
func TestStateHeartbeatRenews(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", producer, map[string]any{})
	var c claimed
	s.must(200, "POST", "/v1/claims", worker, map[string]any{"lease_seconds": 30}).decode(t, &c)

	var hb struct {
		ExpiresAt *time.Time `json:"expires_at"`
		State     string     `json:"state"`
	}
	for i := 0; i < 3; i++ {
		s.Clock.Advance(20 * time.Second) // past the first expiry by the third round
		s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token}).decode(t, &hb)
		if hb.ExpiresAt == nil || !hb.ExpiresAt.Equal(s.Clock.Now().Add(30*time.Second)) || hb.State != tessera.StateLeased {
			t.Fatalf("heartbeat %d: %+v", i, hb)
		}
	}
	s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", worker,
		map[string]any{"lease_token": c.Lease.Token, "lease_seconds": 600, "progress": map[string]any{"pct": 50}}).decode(t, &hb)
	if !hb.ExpiresAt.Equal(s.Clock.Now().Add(600 * time.Second)) {
		t.Fatalf("heartbeat with lease_seconds: %+v", hb)
	}
	if got := s.task("main", producer, task.ID); string(got.Progress) != `{"pct":50}` || !got.Lease.ExpiresAt.Equal(*hb.ExpiresAt) {
		t.Fatalf("progress %s, expires %v", got.Progress, got.Lease.ExpiresAt)
	}
}

// Claims take the highest priority first, then the oldest run_at, then id;
// a task whose run_at is ahead is scheduled and waits for it.
func TestClaimOrder(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	t0 := s.Clock.Now()

	future := s.enqueue("main", producer, map[string]any{"title": "future", "priority": 100, "run_at": t0.Add(time.Hour)})
	if future.State != tessera.StateScheduled {
		t.Fatalf("future task: %s", future.State)
	}
	// a is made first (smallest id) but runs at t0+10s, after b.
	a := s.enqueue("main", producer, map[string]any{"title": "a: prio 5, run_at t0+10s", "priority": 5, "run_at": t0.Add(10 * time.Second)})
	low := s.enqueue("main", producer, map[string]any{"title": "low: prio -5", "priority": -5})
	s.Clock.Set(t0.Add(5 * time.Second))
	b := s.enqueue("main", producer, map[string]any{"title": "b: prio 5, run_at t0+5s", "priority": 5})
	s.Clock.Set(t0.Add(6 * time.Second))
	high := s.enqueue("main", producer, map[string]any{"title": "high: prio 7, newest run_at so far", "priority": 7})
	s.Clock.Set(t0.Add(10 * time.Second))
	d := s.enqueue("main", producer, map[string]any{"title": "d: prio 5, run_at t0+10s, larger id than a", "priority": 5})

	titles := map[string]string{}
	for _, tk := range []tessera.Task{future, a, low, b, high, d} {
		titles[tk.ID] = tk.Title
	}
	for i, want := range []string{high.ID, b.ID, a.ID, d.ID, low.ID} {
		c := s.claim("main", worker, "default")
		if c.Task.ID != want {
			t.Fatalf("claim %d: got %q, want %q", i, titles[c.Task.ID], titles[want])
		}
	}
	s.emptyClaim("main", worker, "default")
	if got := s.task("main", producer, future.ID); got.State != tessera.StateScheduled {
		t.Fatalf("future task before its run_at: %s", got.State)
	}
	s.Clock.Set(t0.Add(time.Hour))
	if c := s.claim("main", worker, "default"); c.Task.ID != future.ID {
		t.Fatalf("after run_at: claimed %q", titles[c.Task.ID])
	}
}

// A task scheduled with run_at in the future is listed as scheduled and is
// not claimable until the clock passes it.
func TestScheduledRunAt(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	runAt := s.Clock.Now().Add(90 * time.Second).Truncate(time.Millisecond)
	task := s.enqueue("main", producer, map[string]any{"run_at": runAt})
	if task.State != tessera.StateScheduled || !task.RunAt.Equal(runAt) {
		t.Fatalf("enqueued: %s at %s", task.State, task.RunAt)
	}
	s.Clock.Set(runAt.Add(-time.Millisecond))
	s.emptyClaim("main", worker, "default")
	s.Clock.Set(runAt)
	if got := s.task("main", producer, task.ID); got.State != tessera.StateReady {
		t.Fatalf("at run_at: %s", got.State)
	}
	if c := s.claim("main", worker, "default"); c.Task.ID != task.ID {
		t.Fatalf("claimed %s", c.Task.ID)
	}
}
