package bench

import (
	"strconv"
)

// dependencyRows measures what dependencies and checkpoints cost: a task
// enqueued after one parent and after ten (the difference, over nine, is
// one edge), a heartbeat that carries a checkpoint, and the submit of a
// parent whose ten children it makes ready (the difference from a plain
// submit, over ten, is what settling one child costs).
func (r *runner) dependencyRows(worker string) {
	const ns = "/ns/deps"
	r.do(200, "GET", ns+"/v1/counts", worker, nil) // the namespace's first writes, not counted below
	var parents []string
	for i := range 11 {
		parents = append(parents, decode[struct{ ID string }](r, r.do(201, "POST", ns+"/v1/tasks", worker,
			map[string]any{"title": "parent " + strconv.Itoa(i), "queue": "parents"})).ID)
	}
	r.measure("enqueue_after_1", func() {
		r.do(201, "POST", ns+"/v1/tasks", worker, map[string]any{"title": "after one", "queue": "children", "after": parents[:1]})
	})
	r.measure("enqueue_after_10", func() {
		r.do(201, "POST", ns+"/v1/tasks", worker, map[string]any{"title": "after ten", "queue": "children", "after": parents[1:]})
	})
	one, ten := r.rows["enqueue_after_1"], r.rows["enqueue_after_10"]
	if one.RowsWritten != nil && ten.RowsWritten != nil {
		w, rd := (*ten.RowsWritten-*one.RowsWritten)/9, (*ten.RowsRead-*one.RowsRead)/9
		r.rows["dependency_edge"] = Row{Request: "dependency_edge", RowsWritten: &w, RowsRead: &rd}
	}
	// A parent with ten children of its own, claimed and submitted.
	parent := decode[struct{ ID string }](r, r.do(201, "POST", ns+"/v1/tasks", worker, map[string]any{"title": "parent of ten", "queue": "tens"})).ID
	for i := range 10 {
		r.do(201, "POST", ns+"/v1/tasks", worker, map[string]any{"title": "child " + strconv.Itoa(i), "queue": "tens-children", "after": []string{parent}})
	}
	c := decode[claimed](r, r.do(200, "POST", ns+"/v1/claims", worker, map[string]any{"queue": "tens", "lease_seconds": 60}))
	r.measure("heartbeat_checkpoint", func() {
		r.do(200, "POST", ns+"/v1/claims/"+c.Lease.TaskID+"/heartbeat", worker,
			map[string]any{"lease_token": c.Lease.Token, "checkpoint": map[string]any{"done": 5}})
	})
	r.measure("submit_parent_of_10", func() {
		r.do(200, "POST", ns+"/v1/claims/"+c.Lease.TaskID+"/submit", worker, map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"})
	})
	if p, s := r.rows["submit_parent_of_10"], r.rows["submit"]; p.RowsWritten != nil && s.RowsWritten != nil {
		w, rd := (*p.RowsWritten-*s.RowsWritten)/10, (*p.RowsRead-*s.RowsRead)/10
		r.rows["settle_per_child"] = Row{Request: "settle_per_child", RowsWritten: &w, RowsRead: &rd}
	}
}
