package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// gateClaimed is a claim's answer with what a gated task's claim adds.
type gateClaimed struct {
	Lease              tessera.Lease                  `json:"lease"`
	Task               tessera.Task                   `json:"task"`
	GateAnswers        map[string]*tessera.GateAnswer `json:"gate_answers"`
	PreviousCheckpoint *tessera.Checkpoint            `json:"previous_checkpoint"`
}

func (s *testServer) gateClaim(queue string) gateClaimed {
	s.t.Helper()
	var c gateClaimed
	s.must(200, "POST", "/v1/claims", adminKey, map[string]any{"queue": queue}).decode(s.t, &c)
	return c
}

var regionForm = map[string]any{"type": "object", "required": []string{"region"}, "properties": map[string]any{
	"region":   map[string]any{"type": "string", "enum": []string{"eu", "us"}},
	"replicas": map[string]any{"type": "integer", "minimum": 1, "maximum": 5},
}}

// A run parks its task on a form gate with a checkpoint: the run ends
// without using an attempt, the task is gated — counted, listed, claimed
// by nobody — and answers are held to the form's schema, naming the field.
// The accepted answer makes the task ready, and its next claim carries the
// answer beside the checkpoint.
func TestGateParksATaskUntilItsFormIsAnswered(t *testing.T) {
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{"queue": "deploy", "max_attempts": 1})
	c := s.gateClaim("deploy")
	var gated tessera.Task
	s.must(200, "POST", "/v1/claims/"+task.ID+"/gate", adminKey, map[string]any{"lease_token": c.Lease.Token,
		"key": "where", "message": "Deploy where?", "schema": regionForm, "checkpoint": map[string]int{"built": 1}}).decode(t, &gated)
	if gated.State != tessera.StateGated || gated.Attempts != 0 || gated.Lease != nil {
		t.Fatalf("parked: %+v", gated)
	}
	// The lease is over: its token no longer holds anything.
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/heartbeat", adminKey, map[string]any{"lease_token": c.Lease.Token}), 409, "lease_lost", "")
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/gate", adminKey, map[string]any{"lease_token": c.Lease.Token, "key": "again", "message": "?"}), 409, "lease_lost", "")
	s.emptyClaim("main", adminKey, "deploy")
	var counts struct {
		Queues map[string]map[string]int `json:"queues"`
	}
	s.must(200, "GET", "/v1/counts", adminKey, nil).decode(t, &counts)
	if counts.Queues["deploy"][tessera.StateGated] != 1 || counts.Queues["deploy"][tessera.StateReady] != 0 {
		t.Fatalf("counts: %v", counts.Queues)
	}
	if ids := s.listIDs("main", adminKey, "?state=gated"); len(ids) != 1 || ids[0] != task.ID {
		t.Fatalf("listed gated: %v", ids)
	}
	got := s.task("main", adminKey, task.ID)
	if len(got.Gates) != 1 || got.Gates[0].Key != "where" || got.Gates[0].Kind != tessera.GateForm || got.Gates[0].RunID != c.Lease.RunID ||
		got.Gates[0].Answer != nil || got.Gates[0].OnTimeout != tessera.OnTimeoutFail || got.Gates[0].TimeoutAt != nil {
		t.Fatalf("gates on the task: %+v", got.Gates)
	}

	answer := func(body map[string]any) *response {
		return s.do("POST", "/v1/tasks/"+task.ID+"/gates/where", adminKey, body)
	}
	for _, bad := range []struct {
		content any
		msg     string
	}{
		{map[string]any{"replicas": 2}, `field "region" is required`},
		{map[string]any{"region": "mars"}, `field "region": "mars" is not one of the choices`},
		{map[string]any{"region": "eu", "replicas": 9}, `field "replicas": must be at most 5`},
		{map[string]any{"region": "eu", "replicas": 1.5}, `field "replicas": must be an integer`},
		{map[string]any{"region": "eu", "color": "red"}, `field "color" is not in the schema`},
		{[]int{1}, "content must be a JSON object"},
	} {
		e := wantError(t, answer(map[string]any{"action": "accept", "content": bad.content}), 400, "invalid_request", "content")
		if !strings.Contains(e.Error.Message, bad.msg) {
			t.Errorf("content %v: %q, want it to say %q", bad.content, e.Error.Message, bad.msg)
		}
	}
	wantError(t, answer(map[string]any{"action": "maybe"}), 400, "invalid_request", "action")
	wantError(t, s.do("POST", "/v1/tasks/"+task.ID+"/gates/nope", adminKey, map[string]any{"action": "accept"}), 404, "not_found", "")
	producer, producerID := s.newKey("service", "namespace:main", "enqueue")
	reader, _ := s.newKey("service", "namespace:main", "read")
	wantError(t, s.do("POST", "/v1/tasks/"+task.ID+"/gates/where", reader, map[string]any{"action": "accept"}), 403, "forbidden", "")

	var ready tessera.Task
	s.must(200, "POST", "/v1/tasks/"+task.ID+"/gates/where", producer,
		map[string]any{"action": "accept", "content": map[string]any{"region": "eu", "replicas": 3}}).decode(t, &ready)
	if ready.State != tessera.StateReady || len(ready.Gates) != 1 || ready.Gates[0].Answer == nil {
		t.Fatalf("answered: %+v", ready)
	}
	wantError(t, answer(map[string]any{"action": "decline"}), 409, "invalid_state", "")

	again := s.gateClaim("deploy")
	a := again.GateAnswers["where"]
	if a == nil || a.Action != tessera.GateAccept || a.AnsweredBy != producerID || !a.At.Equal(s.Clock.Now()) ||
		string(a.Content) != `{"region":"eu","replicas":3}` || len(again.GateAnswers) != 1 {
		t.Fatalf("gate answers on the claim: %+v", again.GateAnswers)
	}
	if again.PreviousCheckpoint == nil || string(again.PreviousCheckpoint.Value) != `{"built":1}` || again.Task.Attempts != 1 {
		t.Fatalf("checkpoint and attempts on the claim: %+v, %d", again.PreviousCheckpoint, again.Task.Attempts)
	}
	done := s.submit("main", adminKey, claimed{Lease: again.Lease, Task: again.Task}, "succeeded")
	if done.State != tessera.StateSucceeded {
		t.Fatalf("submitted: %+v", done)
	}
}

// Gates at enqueue start a task gated; several gates at once wait for
// every answer; a decline is an answer (the worker decides); a key is
// unique for the task's life; and opening a gate is refused a task whose
// cancel was requested — it ends canceled instead.
func TestGatesAtEnqueueAndSeveralAtOnce(t *testing.T) {
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{"queue": "ship", "gates": []map[string]any{
		{"key": "approve", "message": "Ship it?"},
		{"key": "login", "message": "Sign in to the registry", "url": "https://registry.example/auth"},
	}})
	if task.State != tessera.StateGated {
		t.Fatalf("enqueued: %+v", task)
	}
	got := s.task("main", adminKey, task.ID)
	if len(got.Gates) != 2 || got.Gates[0].Kind != tessera.GateApproval || got.Gates[1].Kind != tessera.GateURL || got.Gates[0].RunID != "" {
		t.Fatalf("gates: %+v", got.Gates)
	}
	wantError(t, s.do("POST", "/v1/tasks/"+task.ID+"/gates/approve", adminKey, map[string]any{"action": "accept", "content": map[string]any{"x": 1}}),
		400, "invalid_request", "content")
	var still tessera.Task
	s.must(200, "POST", "/v1/tasks/"+task.ID+"/gates/approve", adminKey, map[string]any{"action": "decline"}).decode(t, &still)
	if still.State != tessera.StateGated {
		t.Fatalf("one of two answered: %+v", still)
	}
	s.emptyClaim("main", adminKey, "ship")
	s.must(200, "POST", "/v1/tasks/"+task.ID+"/gates/login", adminKey, map[string]any{"action": "accept"})
	c := s.gateClaim("ship")
	if c.Task.ID != task.ID || c.GateAnswers["approve"].Action != tessera.GateDecline || c.GateAnswers["login"].Action != tessera.GateAccept {
		t.Fatalf("claim: %+v", c)
	}
	// The run opens two more at once; a key used before is refused.
	gate := func(gates ...map[string]any) *response {
		return s.do("POST", "/v1/claims/"+task.ID+"/gate", adminKey, map[string]any{"lease_token": c.Lease.Token, "gates": gates})
	}
	wantError(t, gate(map[string]any{"key": "approve", "message": "again?"}), 400, "invalid_request", "key")
	wantError(t, gate(map[string]any{"key": "a", "message": "x"}, map[string]any{"key": "a", "message": "y"}), 400, "invalid_request", "key")
	wantError(t, gate(map[string]any{"key": "b", "message": "x", "kind": "form"}), 400, "invalid_request", "gates[0].schema")
	wantError(t, gate(map[string]any{"key": "b", "message": "x", "schema": map[string]any{"type": "object", "properties": map[string]any{"nested": map[string]any{"type": "object"}}}}),
		400, "invalid_request", "gates[0].schema")
	wantError(t, gate(map[string]any{"key": "b", "message": "x", "url": "javascript:alert(1)"}), 400, "invalid_request", "gates[0].url")
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/gate", adminKey, map[string]any{"lease_token": c.Lease.Token}), 400, "invalid_request", "key")
	s.change("main", adminKey, task.ID, "cancel")
	var canceled tessera.Task
	s.must(200, "POST", "/v1/claims/"+task.ID+"/gate", adminKey, map[string]any{"lease_token": c.Lease.Token, "key": "b", "message": "x"}).decode(t, &canceled)
	if canceled.State != tessera.StateCanceled || len(s.task("main", adminKey, task.ID).Gates) != 2 {
		t.Fatalf("a canceled task's gate: %+v", canceled)
	}
	wantError(t, s.do("POST", "/v1/tasks", adminKey, map[string]any{"title": "x", "after": []string{task.ID}, "gates": []map[string]any{{"key": "k", "message": "m"}}}),
		400, "invalid_request", "gates")
}

// Timeouts, at a fixed clock: a gate that times out with on_timeout
// "continue" lets the task run with the timeout as its answer; with
// "fail" (the default) the task ends dead. A canceled task's gate closes
// when its time comes and leaves the task as it is. Each fires once.
func TestGateTimeouts(t *testing.T) {
	s := newTestServer(t)
	st := s.openStream("/v1/events?queue=t", adminKey)
	cont := s.enqueue("main", adminKey, map[string]any{"queue": "t", "gates": []map[string]any{{"key": "k", "message": "m", "timeout_seconds": 60, "on_timeout": "continue"}}})
	fail := s.enqueue("main", adminKey, map[string]any{"queue": "t", "gates": []map[string]any{{"key": "k", "message": "m", "timeout_seconds": 120}}})
	gone := s.enqueue("main", adminKey, map[string]any{"queue": "t", "gates": []map[string]any{{"key": "k", "message": "m", "timeout_seconds": 60}}})
	s.change("main", adminKey, gone.ID, "cancel")
	for _, want := range []string{"task.enqueued t gated " + cont.ID, "task.enqueued t gated " + fail.ID, "task.enqueued t gated " + gone.ID, "task.canceled t canceled " + gone.ID} {
		if e := st.event(); short(e) != want {
			t.Fatalf("event %+v, want %s", e, want)
		}
	}

	s.Clock.Advance(59 * time.Second)
	next, err := s.Core.TimeOutGates(t.Context())
	if err != nil || !next.Equal(s.Clock.Now().Add(time.Second)) {
		t.Fatalf("before the first timeout: next %v, %v", next, err)
	}
	if got := s.task("main", adminKey, cont.ID); got.State != tessera.StateGated {
		t.Fatalf("before its time: %s", got.State)
	}
	s.Clock.Advance(time.Second)
	if next, err = s.Core.TimeOutGates(t.Context()); err != nil || !next.Equal(s.Clock.Now().Add(time.Minute)) {
		t.Fatalf("at the first timeouts: next %v, %v", next, err)
	}
	if e := st.event(); short(e) != "task.gate_timed_out t ready "+cont.ID || e.Action != core.ActGateTimeout {
		t.Fatalf("event: %+v", e)
	}
	if got := s.task("main", adminKey, gone.ID); got.State != tessera.StateCanceled || got.Gates[0].Answer == nil || got.Gates[0].Answer.Action != tessera.GateTimeout {
		t.Fatalf("a canceled task's gate: %+v", got)
	}
	c := s.gateClaim("t")
	if c.Task.ID != cont.ID || c.GateAnswers["k"].Action != tessera.GateTimeout || c.GateAnswers["k"].AnsweredBy != "" {
		t.Fatalf("claim after a timeout: %+v", c)
	}
	st.event() // the claim
	wantError(t, s.do("POST", "/v1/tasks/"+cont.ID+"/gates/k", adminKey, map[string]any{"action": "accept"}), 409, "invalid_state", "")

	s.Clock.Advance(time.Minute)
	if next, err = s.Core.TimeOutGates(t.Context()); err != nil || !next.IsZero() {
		t.Fatalf("at the last timeout: next %v, %v", next, err)
	}
	if e := st.event(); short(e) != "task.gate_timed_out t dead "+fail.ID {
		t.Fatalf("event: %+v", e)
	}
	if got := s.task("main", adminKey, fail.ID); got.State != tessera.StateDead || got.Error != "gate k timed out" {
		t.Fatalf("failed by its timeout: %+v", got)
	}
	st.quiet()
}

// The stream and the trail tell a gate's life: the run that parked its
// task, the answer.
func TestGateEvents(t *testing.T) {
	s := newTestServer(t)
	st := s.openStream("/v1/events?queue=g", adminKey)
	st.quiet()
	task := s.enqueue("main", adminKey, map[string]any{"queue": "g"})
	st.event()
	c := s.claim("main", adminKey, "g")
	st.event()
	s.must(200, "POST", "/v1/claims/"+task.ID+"/gate", adminKey, map[string]any{"lease_token": c.Lease.Token, "key": "ok", "message": "OK?"})
	if e := st.event(); short(e) != "task.gated g gated "+task.ID || e.Action != core.ActGateOpen || e.RunID != c.Lease.RunID {
		t.Fatalf("gated: %+v", e)
	}
	s.must(200, "POST", "/v1/tasks/"+task.ID+"/gates/ok", adminKey, map[string]any{"action": "accept"})
	if e := st.event(); short(e) != "task.gate_answered g ready "+task.ID || e.Action != core.ActGateAnswer {
		t.Fatalf("answered: %+v", e)
	}
	st.quiet()
}

// Rows: opening a gate costs a submit's rows and the gate's own, an
// answer a heartbeat's, the task's change and the gate's row (the issue
// asked ≤ a submit; the gate has to be stored somewhere: design.md).
func TestGateRows(t *testing.T) {
	s := newTestServer(t)
	// Warm up: each action's first use by a key also records it.
	s.enqueue("main", adminKey, map[string]any{"queue": "r"})
	warm := s.claim("main", adminKey, "r")
	s.must(200, "POST", "/v1/claims/"+warm.Task.ID+"/heartbeat", adminKey, map[string]any{"lease_token": warm.Lease.Token})
	s.must(200, "POST", "/v1/claims/"+warm.Task.ID+"/gate", adminKey, map[string]any{"lease_token": warm.Lease.Token, "key": "k", "message": "m"})
	s.must(200, "POST", "/v1/tasks/"+warm.Task.ID+"/gates/k", adminKey, map[string]any{"action": "accept"})
	s.submit("main", adminKey, s.claim("main", adminKey, "r"), "succeeded")
	for range 2 {
		s.enqueue("main", adminKey, map[string]any{"queue": "r"})
	}
	first, second := s.claim("main", adminKey, "r"), s.claim("main", adminKey, "r")
	submit, _ := meterDelta(s.Meter, func() { s.submit("main", adminKey, first, "succeeded") })
	heartbeat, _ := meterDelta(s.Meter, func() {
		s.must(200, "POST", "/v1/claims/"+second.Task.ID+"/heartbeat", adminKey, map[string]any{"lease_token": second.Lease.Token})
	})
	open, _ := meterDelta(s.Meter, func() {
		s.must(200, "POST", "/v1/claims/"+second.Task.ID+"/gate", adminKey, map[string]any{"lease_token": second.Lease.Token, "key": "k", "message": "m"})
	})
	answer, _ := meterDelta(s.Meter, func() {
		s.must(200, "POST", "/v1/tasks/"+second.Task.ID+"/gates/k", adminKey, map[string]any{"action": "accept"})
	})
	t.Logf("rows written: submit %d, open a gate %d, heartbeat %d, answer %d", submit, open, heartbeat, answer)
	// Opening a gate writes what a submit does (the task and its index
	// entries, its counts, the audit event) and the gate's row; an answer
	// writes what a heartbeat does (the audit event, the task) and the
	// task's change (its index entry, its counts), and the gate's row.
	// PostgreSQL's meter weighs a row by its table's indexes: the gate's
	// row is 3 (the row, its key, its timer entry), and an answer moves
	// it off the timer's index.
	gateRow, change := int64(1), int64(2)
	if onPostgres {
		gateRow, change = 3, 4
	}
	if open != submit+gateRow || answer != heartbeat+change+gateRow {
		t.Errorf("open a gate %d rows (submit %d), answer %d (heartbeat %d)", open, submit, answer, heartbeat)
	}
}

// An answer's content is bounded like every body, and an unknown field is
// refused.
func TestGateAnswerBounds(t *testing.T) {
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{"gates": []map[string]any{{"key": "k", "message": "m", "schema": regionForm}}})
	big := map[string]any{"region": strings.Repeat("x", core.MaxGateContentLen)}
	wantError(t, s.do("POST", "/v1/tasks/"+task.ID+"/gates/k", adminKey, map[string]any{"action": "accept", "content": big}), 400, "invalid_request", "content")
	wantError(t, s.do("POST", "/v1/tasks/"+task.ID+"/gates/k", adminKey, map[string]any{"action": "accept", "extra": 1}), 400, "invalid_request", "extra")
	raw, _ := json.Marshal(map[string]any{"title": "x", "gates": []map[string]any{{"key": "k", "message": strings.Repeat("m", core.MaxGateMessageLen+1)}}})
	wantError(t, s.do("POST", "/v1/tasks", adminKey, json.RawMessage(raw)), 400, "invalid_request", "gates[0].message")
}
