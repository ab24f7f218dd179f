package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
		// The first batch alone: a server that refuses the body this
		// bench sends (another shape than {"tasks": [...]}) is worked
		// around with single enqueues, and says so.
		first := min(n, batchSize)
		err := workers[0].enqueueBatch(ctx, first)
		switch {
		case err == nil:
			rep.Method = "batch"
			next.Store(int64(first))
		case isClientError(err):
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
	tasks := make([]client.EnqueueRequest, size)
	for i := range tasks {
		tasks[i] = w.enqueueRequest()
	}
	body, err := json.Marshal(map[string]any{"tasks": tasks})
	if err != nil {
		return err
	}
	u := w.base + "/ns/" + url.PathEscape(w.c.Namespace()) + batchPath
	start := time.Now()
	res, err := rawRequest(ctx, w.hc, "POST", u, w.key, body, http.Header{"Idempotency-Key": {client.NewIdempotencyKey()}})
	if err != nil {
		w.st.fail(callEnqueueBatch, err)
		w.unsure += size
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err == nil && res.StatusCode/100 != 2 {
		err = &batchError{status: res.StatusCode, body: string(bytes.TrimSpace(b[:min(len(b), 300)]))}
	}
	var out struct {
		Tasks []client.Task `json:"tasks"`
	}
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err == nil && len(out.Tasks) != size {
		err = fmt.Errorf("batch of %d answered %d tasks", size, len(out.Tasks))
	}
	if err != nil {
		w.st.fail(callEnqueueBatch, err)
		if !isClientError(err) {
			w.unsure += size
		}
		return err
	}
	w.st.lat[callEnqueueBatch].record(time.Since(start))
	for _, t := range out.Tasks {
		w.note(t.ID, func(s *taskSeen) { s.enqueued = true })
	}
	return nil
}

// batchError is a batch the server answered with an error status.
type batchError struct {
	status int
	body   string
}

func (e *batchError) Error() string {
	return fmt.Sprintf("POST %s: %d %s", batchPath, e.status, e.body)
}

// isClientError is a batch the server refused as a request it does not
// take (400, 404, 405, 413, 415, 422): all or nothing, so nothing was
// created.
func isClientError(err error) bool {
	be, ok := err.(*batchError)
	return ok && be.status >= 400 && be.status < 500 && be.status != http.StatusTooManyRequests
}
