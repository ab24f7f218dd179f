package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// batchPath is the batch enqueue route, used when the server's OpenAPI
// description lists it; batchSize is its bound.
const (
	batchPath = "/v1/tasks/batch"
	batchSize = 500
)

// BacklogReport says how the backlog was put on the queue.
type BacklogReport struct {
	Tasks int64 `json:"tasks"`
	// Method is "batch" (POST /v1/tasks/batch) or "single" (one
	// POST /v1/tasks per task); Note says why single when batch was tried.
	Method         string   `json:"method"`
	Note           string   `json:"note,omitempty"`
	Seconds        float64  `json:"seconds"`
	TasksPerSecond float64  `json:"tasks_per_second"`
	RowsWritten    *float64 `json:"rows_written_per_task"`
}

// hasRoute reports whether the server's OpenAPI description lists
// method path (path as the description spells it, /v1/...).
func hasRoute(ctx context.Context, c *client.Client, method, path string) (bool, error) {
	doc, err := c.Document(ctx, "/v1/openapi.json")
	if err != nil {
		return false, fmt.Errorf("read /v1/openapi.json: %w", err)
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return false, fmt.Errorf("read /v1/openapi.json: %w", err)
	}
	_, ok := d.Paths[path][method]
	return ok, nil
}

// enqueueBacklog puts n tasks on the queue, spread over the workers (and
// so over their keys and nodes): in batches when the server has the
// batch route, else as many concurrent single enqueues.
func enqueueBacklog(ctx context.Context, workers []*worker, n int, useBatch bool) (*BacklogReport, error) {
	rep := &BacklogReport{Tasks: int64(n), Method: "single"}
	start := time.Now()
	next := atomic.Int64{}
	if useBatch {
		// The first batch alone: a server that lists the route but
		// refuses the batch (a 4xx: all or nothing, so nothing was made)
		// is worked around with single enqueues, and the report says so.
		first := min(n, batchSize)
		w := workers[0]
		kept, probe := w.st, &callStats{}
		w.st = probe
		err := w.enqueueBatch(ctx, first)
		w.st = kept
		switch {
		case err == nil:
			kept.merge(probe)
			rep.Method = "batch"
			next.Store(int64(first))
		case isClientError(err): // not a failed call: the note says it
			rep.Note = "the batch route refused the request: " + err.Error()
			useBatch = false
		default:
			return nil, fmt.Errorf("batch enqueue: %w", err)
		}
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if useBatch {
					from := next.Add(batchSize) - batchSize
					if from >= int64(n) {
						return
					}
					if err := w.enqueueBatch(ctx, int(min(batchSize, int64(n)-from))); err != nil {
						pause(ctx, errorPause)
					}
					continue
				}
				if next.Add(1) > int64(n) {
					return
				}
				if !w.enqueue(ctx) {
					pause(ctx, errorPause)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.TasksPerSecond = float64(n) / rep.Seconds
	return rep, nil
}

// enqueueBatch sends one POST /v1/tasks/batch of size tasks, with an
// Idempotency-Key for the whole batch.
func (w *worker) enqueueBatch(ctx context.Context, size int) error {
	req := client.EnqueueBatchRequest{Tasks: make([]client.EnqueueRequest, size)}
	for i := range req.Tasks {
		req.Tasks[i] = w.enqueueRequest()
	}
	start := time.Now()
	tasks, err := w.c.EnqueueBatch(ctx, req)
	if err == nil && len(tasks) != size {
		err = fmt.Errorf("a batch of %d answered %d tasks", size, len(tasks))
	}
	if err != nil {
		w.st.fail(callEnqueueBatch, err)
		if !isClientError(err) {
			w.unsure += size
		}
		return err
	}
	w.st.lat[callEnqueueBatch].record(time.Since(start))
	for _, t := range tasks {
		w.note(t.ID, func(s *taskSeen) { s.enqueued = true })
	}
	return nil
}

// isClientError is a batch the server refused as a request it does not
// take (400, 404, 405, 413, …): all or nothing, so nothing was created.
func isClientError(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests
}
