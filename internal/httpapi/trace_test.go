package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const (
	producerParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	itemParent     = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// A task carries the trace context it was enqueued in (issue 43): the
// traceparent and tracestate headers of an HTTP enqueue, single or batch
// (an item's own trace wins), or the trace field over MCP; every claim
// of it answers it, and a read shows it. A malformed header is ignored,
// as W3C has it; a malformed trace field is refused.
func TestATaskCarriesItsProducersTrace(t *testing.T) {
	s := newTestServer(t)
	want := &tessera.Trace{Traceparent: producerParent, Tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}
	var single tessera.Task
	s.must(201, "POST", "/v1/tasks", adminKey, map[string]any{"title": "traced", "queue": "t"},
		"traceparent", producerParent, "tracestate", want.Tracestate).decode(t, &single)
	if single.Trace == nil || *single.Trace != *want {
		t.Fatalf("enqueued with headers: trace %+v, want %+v", single.Trace, want)
	}

	var batch struct {
		Tasks []tessera.Task `json:"tasks"`
	}
	s.must(201, "POST", "/v1/tasks/batch", adminKey, map[string]any{"tasks": []map[string]any{
		{"title": "the request's", "queue": "t"},
		{"title": "its own", "queue": "t", "trace": map[string]any{"traceparent": itemParent}},
	}}, "traceparent", producerParent).decode(t, &batch)
	if tr := batch.Tasks[0].Trace; tr == nil || tr.Traceparent != producerParent || tr.Tracestate != "" {
		t.Fatalf("a batch item without a trace: %+v, want the request's", tr)
	}
	if tr := batch.Tasks[1].Trace; tr == nil || tr.Traceparent != itemParent {
		t.Fatalf("a batch item with its own trace: %+v", tr)
	}

	for _, bad := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "nonsense"} {
		if got := s.enqueueWith(t, map[string]any{"title": "untraced", "queue": "u"}, "traceparent", bad); got.Trace != nil {
			t.Fatalf("a malformed traceparent header %q was kept: %+v", bad, got.Trace)
		}
		r := s.do("POST", "/v1/tasks", adminKey, map[string]any{"title": "bad", "trace": map[string]any{"traceparent": bad}})
		wantError(t, r, 400, "invalid_request", "trace.traceparent")
	}
	if got := s.enqueueWith(t, map[string]any{"title": "plain", "queue": "u"}); got.Trace != nil {
		t.Fatalf("a task enqueued without a trace has %+v", got.Trace)
	}

	for range 3 {
		c := s.claim("main", adminKey, "t")
		wantTrace := want
		if c.Task.ID == batch.Tasks[0].ID {
			wantTrace = &tessera.Trace{Traceparent: producerParent}
		} else if c.Task.ID == batch.Tasks[1].ID {
			wantTrace = &tessera.Trace{Traceparent: itemParent}
		}
		if c.Task.Trace == nil || *c.Task.Trace != *wantTrace {
			t.Fatalf("the claim of %s answers trace %+v, want %+v", c.Task.ID, c.Task.Trace, wantTrace)
		}
	}
	var read tessera.Task
	s.must(200, "GET", "/v1/tasks/"+single.ID, adminKey, nil).decode(t, &read)
	if read.Trace == nil || *read.Trace != *want {
		t.Fatalf("a read shows trace %+v", read.Trace)
	}

	// Over MCP: the trace field.
	r := s.do("POST", "/mcp", adminKey, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "enqueue_task", "arguments": map[string]any{"title": "by an agent", "queue": "m", "trace": map[string]any{"traceparent": itemParent}}}})
	var res struct {
		Result struct {
			StructuredContent tessera.Task `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Body, &res); err != nil || res.Result.StructuredContent.Trace == nil || res.Result.StructuredContent.Trace.Traceparent != itemParent {
		t.Fatalf("enqueue_task with a trace: %s", r.Body)
	}
	if c := s.claim("main", adminKey, "m"); c.Task.Trace == nil || c.Task.Trace.Traceparent != itemParent {
		t.Fatalf("the claim of an MCP-enqueued task: trace %+v", c.Task.Trace)
	}
}

// enqueueWith enqueues fields in main with headers, wanting 201.
func (s *testServer) enqueueWith(t *testing.T, fields map[string]any, headers ...string) tessera.Task {
	t.Helper()
	var task tessera.Task
	s.must(201, "POST", "/v1/tasks", adminKey, fields, headers...).decode(t, &task)
	return task
}

// A request in a trace is logged with the caller's trace and span ids,
// so its line joins the trace in a log search; one without, without.
func TestARequestsLogLineNamesItsTrace(t *testing.T) {
	logs := &logBuffer{}
	s, _ := serverWith(t, t.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) {
		o.Log = slog.New(slog.NewJSONHandler(logs, nil))
	})
	s.must(201, "POST", "/v1/tasks", adminKey, map[string]any{"title": "traced"}, "traceparent", producerParent)
	s.must(201, "POST", "/v1/tasks", adminKey, map[string]any{"title": "plain"})
	lines := logs.lines(`"op":"task.enqueue"`)
	if len(lines) != 2 {
		t.Fatalf("%d enqueue lines logged, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if want := `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"`; !strings.Contains(lines[0], want) {
		t.Fatalf("the traced enqueue's line:\n%s\nwant it to hold %s", lines[0], want)
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Fatalf("the untraced enqueue's line names a trace:\n%s", lines[1])
	}
}
