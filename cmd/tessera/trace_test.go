package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/telemetry/jaegertest"
)

// One trace shows a task's life across two nodes (issue 43), read back
// from a real Jaeger: a producer enqueues on node A in its trace; a
// worker (the Go client's Work) claims and submits on node B; the
// enqueue's request span is the producer's child, the grant and the run
// (claim to submit, with attempt, queue and outcome) hang under the
// enqueue, the submit request continues the task's trace, and the run is
// linked to the request that ended it. No span holds the key, the lease
// token or the payload.
func TestATasksLifeIsOneTrace(t *testing.T) {
	jaeger := jaegertest.Start(t)
	url := pgtest.Schema(t)
	bin := buildTessera(t)
	nodes := startNodes(t, bin, url, 2, "TESSERA_OTLP_ENDPOINT="+jaeger.OTLP, "OTEL_BSP_SCHEDULE_DELAY=50")

	const traceID, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const secretPayload = "payload-that-no-span-may-hold"
	req, _ := http.NewRequest("POST", nodes[0].url+"/v1/tasks", strings.NewReader(`{"title":"traced work","queue":"traced","payload":{"s":"`+secretPayload+`"}}`))
	req.Header.Set("Authorization", "Bearer "+crashAdminKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+producerSpan+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var task client.Task
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if err := json.Unmarshal(b, &task); err != nil || res.StatusCode != 201 {
		t.Fatalf("enqueue: %d %s", res.StatusCode, b)
	}
	if task.Trace == nil || !strings.HasPrefix(task.Trace.Traceparent, "00-"+traceID+"-") || strings.Contains(task.Trace.Traceparent, producerSpan) {
		t.Fatalf("the task's trace %+v: want the enqueue's own span in the producer's trace", task.Trace)
	}
	enqueueSpan := task.Trace.Traceparent[36:52]

	worker, err := client.New(nodes[1].url, client.WithKey(crashAdminKey))
	if err != nil {
		t.Fatal(err)
	}
	var token string
	err = worker.Work(context.Background(), "traced", func(ctx context.Context, job *client.Job) (any, error) {
		token = job.Lease.Token
		return map[string]bool{"done": true}, nil
	}, client.WorkOptions{MaxTasks: 1})
	if err != nil {
		t.Fatal(err)
	}

	spans := jaeger.Trace(t, traceID, 30*time.Second, "POST /v1/tasks", "tessera.claim traced", "tessera.run traced")
	byName := map[string]jaegertest.Span{}
	var names []string
	for _, s := range spans {
		byName[s.OperationName] = s
		names = append(names, s.OperationName)
	}
	parentOf := func(s jaegertest.Span) string {
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				return r.SpanID
			}
		}
		return ""
	}
	enq, ok := byName["POST /v1/tasks"]
	if !ok || enq.SpanID != enqueueSpan || parentOf(enq) != producerSpan || enq.Tag("http.response.status_code") != "201" {
		t.Fatalf("the enqueue's span: %+v (spans %v); want span %s, child of the producer's %s, status 201", enq, names, enqueueSpan, producerSpan)
	}
	grant, ok := byName["tessera.claim traced"]
	if !ok || parentOf(grant) != enqueueSpan || grant.Tag("tessera.task.id") != task.ID {
		t.Fatalf("the grant's span: %+v (spans %v); want a child of the enqueue", grant, names)
	}
	run, ok := byName["tessera.run traced"]
	if !ok || parentOf(run) != enqueueSpan || run.Tag("tessera.run.outcome") != "succeeded" || run.Tag("tessera.run.attempt") != "1" ||
		run.Tag("tessera.queue") != "traced" {
		t.Fatalf("the run's span: %+v (spans %v); want a child of the enqueue, succeeded, attempt 1", run, names)
	}
	linked := false
	for _, r := range run.References {
		linked = linked || r.RefType == "FOLLOWS_FROM"
	}
	submit, ok := byName["POST /v1/claims/{task_id}/submit"]
	if !ok || parentOf(submit) != enqueueSpan || submit.Tag("http.route") != "/v1/claims/{task_id}/submit" || !linked {
		t.Fatalf("the submit's span: %+v, run linked %v (spans %v); want the worker's submit in the task's trace", submit, linked, names)
	}
	if run.StartTime != grant.StartTime || run.StartTime > submit.StartTime {
		t.Fatalf("the run starts at %d, the grant at %d, the submit at %d: want the run from the claim", run.StartTime, grant.StartTime, submit.StartTime)
	}

	// An MCP tool call is a span of its own under its POST /mcp's.
	const mcpTrace = "0af7651916cd43dd8448eb211c80319c"
	mreq, _ := http.NewRequest("POST", nodes[1].url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"enqueue_task","arguments":{"title":"by an agent","queue":"mcp"}}}`))
	mreq.Header.Set("Authorization", "Bearer "+crashAdminKey)
	mreq.Header.Set("Content-Type", "application/json")
	mreq.Header.Set("Accept", "application/json, text/event-stream")
	mreq.Header.Set("traceparent", "00-"+mcpTrace+"-b7ad6b7169203331-01")
	if res, err := http.DefaultClient.Do(mreq); err != nil || res.StatusCode != 200 {
		t.Fatalf("the MCP enqueue: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	mcpSpans := map[string]jaegertest.Span{}
	for _, s := range jaeger.Trace(t, mcpTrace, 30*time.Second, "POST /mcp", "tools/call enqueue_task") {
		mcpSpans[s.OperationName] = s
	}
	post, call := mcpSpans["POST /mcp"], mcpSpans["tools/call enqueue_task"]
	if post.SpanID == "" || parentOf(post) != "b7ad6b7169203331" || parentOf(call) != post.SpanID || call.Tag("gen_ai.tool.name") != "enqueue_task" {
		t.Fatalf("the MCP call's spans: %+v", mcpSpans)
	}

	// Nothing secret in any attribute.
	all, _ := json.Marshal(spans)
	for what, secret := range map[string]string{"the key": crashAdminKey, "the lease token": token, "the payload": secretPayload} {
		if secret == "" || bytes.Contains(all, []byte(secret)) {
			t.Errorf("a span holds %s (%q)", what, secret)
		}
	}
}
