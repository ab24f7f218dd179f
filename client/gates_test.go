package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

var regionForm = map[string]any{"type": "object", "required": []string{"region"}, "properties": map[string]any{
	"region":   map[string]any{"type": "string", "enum": []string{"eu", "us"}},
	"replicas": map[string]any{"type": "integer", "minimum": 1, "maximum": 5},
}}

// A handler parks its task on gates with job.Gate and Work opens them
// instead of submitting: the task is gated with no attempt used, and the
// checkpoint set last — held back from the heartbeats by their spacing —
// goes with the gates. Answers (an accepted form's content, a decline, the
// gate a task was enqueued with) reach the next run's handler in
// job.GateAnswers, beside that checkpoint.
func TestWorkParksATaskOnGatesUntilTheyAreAnswered(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)
	me := ok(c.Me(ctx)).Principal.ID
	ids := enqueueN(t, c, "deploy", "form", "approval")
	enqueued := ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "deploy", Title: "enqueued gated", Payload: "enqueued",
		Gates: []client.GateSpec{{Key: "approve", Message: "Ship it?"}}}))
	if enqueued.State != client.StateGated {
		t.Fatalf("enqueued with a gate: %s", enqueued.State)
	}

	handler := func(ctx context.Context, job *client.Job) (any, error) {
		if job.GateAnswers != nil {
			seen := map[string]any{}
			if cp := job.PreviousCheckpoint; cp != nil {
				seen["checkpoint"] = cp.Value
			}
			for key, a := range job.GateAnswers {
				seen[key] = []any{a.Action, a.Content, a.AnsweredBy == me}
			}
			return seen, nil
		}
		var what string
		if err := json.Unmarshal(job.Task.Payload, &what); err != nil {
			return nil, err
		}
		if what == "approval" {
			return job.Gate(client.GateSpec{Key: "ship", Message: "Ship to production?"})
		}
		job.Checkpoint(map[string]int{"built": 1})
		// Once a heartbeat has carried the first checkpoint, the second
		// waits out the heartbeats' spacing: only the gates can carry it.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if got, err := c.GetTask(ctx, job.Task.ID); err == nil && got.Checkpoint != nil && string(got.Checkpoint.Value) == `{"built":1}` {
				break
			}
			if time.Now().After(deadline) {
				return nil, errors.New("no heartbeat carried the first checkpoint")
			}
		}
		job.Checkpoint(map[string]int{"built": 2})
		return job.Gate(client.GateSpec{Key: "where", Message: "Deploy where?", Schema: regionForm})
	}
	if err := c.Work(ctx, "deploy", handler, client.WorkOptions{Concurrency: 2, MaxTasks: 2}); err != nil {
		t.Fatal(err)
	}
	for i, kind := range []string{client.GateForm, client.GateApproval} {
		got := getTask(t, c, ids[i])
		if got.State != client.StateGated || got.Attempts != 0 || len(got.Result) != 0 || len(got.Runs) != 1 || got.Runs[0].Outcome != "gated" {
			t.Fatalf("task %d after its run: %s, attempts %d, result %s, runs %+v", i, got.State, got.Attempts, got.Result, got.Runs)
		}
		if len(got.Gates) != 1 || got.Gates[0].Kind != kind || got.Gates[0].RunID != got.Runs[0].ID || got.Gates[0].Answer != nil {
			t.Fatalf("task %d's gates: %+v", i, got.Gates)
		}
	}

	_, err := c.AnswerGate(ctx, ids[0], "where", client.GateAnswerRequest{Action: client.GateAccept, Content: map[string]any{"region": "mars"}})
	var bad *client.Error
	if !asError(err, &bad) || bad.Code != client.CodeInvalidRequest || bad.Details.Field != "content" {
		t.Fatalf("an answer outside the form's schema: %v", err)
	}
	answered := ok(c.AnswerGate(ctx, ids[0], "where", client.GateAnswerRequest{Action: client.GateAccept, Content: map[string]any{"region": "eu", "replicas": 3}}))
	if answered.State != client.StateReady || len(answered.Gates) != 1 || answered.Gates[0].Answer == nil || answered.Gates[0].Answer.AnsweredBy != me {
		t.Fatalf("the form answered: %s, gates %+v", answered.State, answered.Gates)
	}
	ok(c.AnswerGate(ctx, ids[1], "ship", client.GateAnswerRequest{Action: client.GateDecline}))
	ok(c.AnswerGate(ctx, enqueued.ID, "approve", client.GateAnswerRequest{Action: client.GateAccept}))

	if err := c.Work(ctx, "deploy", handler, client.WorkOptions{Concurrency: 3, MaxTasks: 3}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		ids[0]:      `{"checkpoint":{"built":2},"where":["accept",{"region":"eu","replicas":3},true]}`,
		ids[1]:      `{"ship":["decline",null,true]}`,
		enqueued.ID: `{"approve":["accept",null,true]}`,
	} {
		if got := getTask(t, c, id); got.State != client.StateSucceeded || string(got.Result) != want || got.Attempts != 1 {
			t.Errorf("task %s: %s after %d attempt(s), result %s\nwant %s", id, got.State, got.Attempts, got.Result, want)
		}
	}
}

// Gates the server refuses (a form without its schema) fail the run with
// why: a handler that meant to wait for a person neither passes for done
// nor holds its task until the lease lapses.
func TestWorkFailsARunWhoseGatesAreRefused(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL, testserver.AdminKey)
	ids := enqueueN(t, c, "deploy", nil)
	err := c.Work(context.Background(), "deploy", func(ctx context.Context, job *client.Job) (any, error) {
		return job.Gate(client.GateSpec{Key: "where", Kind: client.GateForm, Message: "Deploy where?"})
	}, client.WorkOptions{MaxTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := getTask(t, c, ids[0])
	if got.State != client.StateDead || !strings.HasPrefix(got.Error, "open gates where: ") || !strings.Contains(got.Error, "schema") || len(got.Gates) != 0 {
		t.Fatalf("the task whose gates were refused: %s, error %q, gates %+v", got.State, got.Error, got.Gates)
	}
}
