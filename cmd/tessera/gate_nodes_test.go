package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
)

// Gates on two PostgreSQL nodes: answers racing for one gate from both
// nodes record exactly one, and a gate's timeout fires once, on whichever
// node is up — also when the node that opened it is gone.
func TestGatesAcrossNodes(t *testing.T) {
	url := pgtest.Schema(t)
	nodes := startNodes(t, buildTessera(t), url, 2)
	type gate struct {
		Key    string `json:"key"`
		Answer *struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		} `json:"answer"`
	}
	type task struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Error string `json:"error"`
		Gates []gate `json:"gates"`
	}
	enqueue := func(node *server, title string, g map[string]any) task {
		var out task
		node.must(201, "POST", "/v1/tasks", crashAdminKey, map[string]any{"title": title, "queue": "gates", "gates": []any{g}}, &out)
		if out.State != "gated" {
			t.Fatalf("enqueued %+v, want gated", out)
		}
		return out
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"who": map[string]any{"type": "integer"}}, "required": []string{"who"}}

	// Four answerers, two on each node, race for each of 20 gates.
	const tasks, answerers = 20, 4
	for i := range tasks {
		tk := enqueue(nodes[i%2], fmt.Sprint("race ", i), map[string]any{"key": "pick", "message": "Who wins?", "schema": schema})
		var wg sync.WaitGroup
		statuses := make([]int, answerers)
		for a := range answerers {
			wg.Go(func() {
				status, b, err := nodes[a%2].call("POST", "/v1/tasks/"+tk.ID+"/gates/pick", crashAdminKey,
					map[string]any{"action": "accept", "content": map[string]int{"who": a}})
				if err != nil {
					t.Error(err)
				}
				if status != http.StatusOK && status != http.StatusConflict {
					t.Errorf("answer %d of task %s: %d %s", a, tk.ID, status, b)
				}
				statuses[a] = status
			})
		}
		wg.Wait()
		winner := -1
		for a, status := range statuses {
			if status == http.StatusOK {
				if winner >= 0 {
					t.Fatalf("task %s: answerers %d and %d both recorded: %v", tk.ID, winner, a, statuses)
				}
				winner = a
			}
		}
		if winner < 0 {
			t.Fatalf("task %s: no answer recorded: %v", tk.ID, statuses)
		}
		var got task
		nodes[(i+1)%2].must(200, "GET", "/v1/tasks/"+tk.ID, crashAdminKey, nil, &got)
		if got.State != "ready" || len(got.Gates) != 1 || got.Gates[0].Answer == nil ||
			string(got.Gates[0].Answer.Content) != fmt.Sprintf(`{"who":%d}`, winner) {
			t.Fatalf("task %s after the race (winner %d): %+v", tk.ID, winner, got)
		}
	}

	// Timeouts: both nodes' timers see each gate come due; one records it.
	var timed []task
	for i := range 6 {
		timed = append(timed, enqueue(nodes[i%2], fmt.Sprint("timeout ", i),
			map[string]any{"key": "late", "message": "Anyone?", "timeout_seconds": 1, "on_timeout": []string{"continue", "fail"}[i%2]}))
	}
	// The last opens on node A, which then goes: node B times it out.
	orphan := enqueue(nodes[0], "orphan", map[string]any{"key": "late", "message": "Anyone?", "timeout_seconds": 2})
	nodes[0].kill()
	timed = append(timed, orphan)

	deadline := time.Now().Add(30 * time.Second)
	for i, tk := range timed {
		want := map[bool]string{true: "ready", false: "dead"}[i%2 == 0 && tk.ID != orphan.ID]
		var got task
		for {
			nodes[1].must(200, "GET", "/v1/tasks/"+tk.ID, crashAdminKey, nil, &got)
			if got.State != "gated" || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got.State != want || got.Gates[0].Answer == nil || got.Gates[0].Answer.Action != "timeout" {
			t.Fatalf("timed-out task %d: %+v, want %s with the gate timed out", i, got, want)
		}
		if want == "dead" && got.Error != "gate late timed out" {
			t.Errorf("task %d died with %q", i, got.Error)
		}
		var trail struct {
			Events []struct {
				Kind string `json:"kind"`
			} `json:"events"`
		}
		nodes[1].must(200, "GET", "/v1/tasks/"+tk.ID+"/trail", crashAdminKey, nil, &trail)
		n := 0
		for _, e := range trail.Events {
			if e.Kind == "task.gate_timed_out" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("task %d's trail holds %d timeouts, want 1: %+v", i, n, trail.Events)
		}
	}
}
