package bench

import "strconv"

// fleetRows measures what fleet claims cost (issue 31): a task enqueued
// into a group's lane that exists already, a claim and a submit of it in
// a queue with groups (the claim rotates, so it writes its group's row
// too), a claim with capabilities of a task that requires one, and that
// same claim beside 1,000 ready tasks it cannot take.
func (r *runner) fleetRows(worker string) {
	const ns = "/ns/fleet"
	r.do(200, "GET", ns+"/v1/counts", worker, nil) // the namespace's first writes, not counted below
	enqueue := func(body map[string]any) {
		r.do(201, "POST", ns+"/v1/tasks", worker, body)
	}
	// Warm: each lane and group row exists before the measured requests.
	for _, g := range []string{"tenant-a", "tenant-b"} {
		enqueue(map[string]any{"title": "warm " + g, "queue": "groups", "group": g})
	}
	r.measure("enqueue_grouped", func() { enqueue(map[string]any{"title": "grouped", "queue": "groups", "group": "tenant-a"}) })
	r.do(200, "POST", ns+"/v1/claims", worker, map[string]any{"queue": "groups"}) // the rotation's first write of each group
	var c claimed
	r.measure("claim_grouped", func() {
		c = decode[claimed](r, r.do(200, "POST", ns+"/v1/claims", worker, map[string]any{"queue": "groups", "lease_seconds": 60}))
	})
	r.measure("submit_grouped", func() {
		r.do(200, "POST", ns+"/v1/claims/"+c.Lease.TaskID+"/submit", worker, map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"})
	})
	gpu := map[string]any{"queue": "gpus", "lease_seconds": 60, "capabilities": []string{"gpu", "repo:main"}}
	unmatched := func(n int) {
		for i := range n {
			enqueue(map[string]any{"title": "unmatched " + strconv.Itoa(i), "queue": "gpus", "requires": []string{"tpu"}})
		}
	}
	for range 3 {
		enqueue(map[string]any{"title": "needs a gpu", "queue": "gpus", "requires": []string{"gpu"}})
	}
	// One unmatched task first, so both measured claims see the same
	// lanes: a claim reads its queue's lane rows, as many as the
	// (group, requires) pairs, whatever their tasks.
	unmatched(1)
	r.do(200, "POST", ns+"/v1/claims", worker, gpu) // the claimant's capabilities, recorded once a minute
	r.measure("claim_requires", func() { r.do(200, "POST", ns+"/v1/claims", worker, gpu) })
	unmatched(999)
	r.measure("claim_requires_1k_unmatched", func() { r.do(200, "POST", ns+"/v1/claims", worker, gpu) })
}

// uniqueRows measures an enqueue with a unique key no task holds (the
// task, and the key's row) and one whose key a task holds: that task
// answered, and no task written; and the same with a debounce key, whose
// hit writes its task's title and run_at.
func (r *runner) uniqueRows(worker string) {
	const ns = "/ns/fleet"
	keyed := map[string]any{"title": "sync account 7", "queue": "unique", "unique_key": "acct-7"}
	r.do(201, "POST", ns+"/v1/tasks", worker, map[string]any{"title": "warm", "queue": "unique"})
	r.measure("enqueue_unique", func() { r.do(201, "POST", ns+"/v1/tasks", worker, keyed) })
	r.measure("enqueue_unique_hit", func() { r.do(200, "POST", ns+"/v1/tasks", worker, keyed) })
	debounced := map[string]any{"title": "reindex doc 9", "queue": "unique", "debounce": map[string]any{"key": "doc-9", "seconds": 60}}
	r.measure("enqueue_debounce", func() { r.do(201, "POST", ns+"/v1/tasks", worker, debounced) })
	debounced["title"] = "reindex doc 9 again"
	r.measure("enqueue_debounce_hit", func() { r.do(200, "POST", ns+"/v1/tasks", worker, debounced) })
}
