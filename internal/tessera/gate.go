package tessera

import (
	"encoding/json"
	"time"
)

// A gate is a question a task waits on without holding a worker: a run
// parks its task on gates (or a producer enqueues it with them), the task
// is gated, and it becomes ready again when every open gate is answered,
// or when one times out. The next claim carries the answers.

// Gate kinds: what the person answering is shown.
const (
	// GateForm asks for content matching Schema (the MCP elicitation's
	// restricted subset: a flat object of primitive fields).
	GateForm = "form"
	// GateURL sends the person to URL (for anything sensitive, which
	// must not pass through the client); the answer carries no content.
	GateURL = "url"
	// GateApproval asks for accept or decline, with no content needed.
	GateApproval = "approval"
)

// Gate answer actions, as MCP's elicitation names them, and the action a
// timeout records.
const (
	GateAccept  = "accept"
	GateDecline = "decline"
	GateCancel  = "cancel"
	GateTimeout = "timeout"
)

// What a gate's timeout does to its task.
const (
	// OnTimeoutFail ends the task dead: nobody answered in time.
	OnTimeoutFail = "fail"
	// OnTimeoutContinue records the timeout as the gate's answer and lets
	// the task run when its other gates are answered.
	OnTimeoutContinue = "continue"
)

// Gate is one question of a task, open until Answer is set.
type Gate struct {
	Namespace string          `json:"-"`
	TaskID    string          `json:"-"`
	Key       string          `json:"key"`
	Kind      string          `json:"kind"`
	Message   string          `json:"message"`
	Schema    json.RawMessage `json:"schema,omitempty"`
	URL       string          `json:"url,omitempty"`
	// TimeoutAt is when an unanswered gate times out; nil for never.
	TimeoutAt *time.Time `json:"timeout_at,omitempty"`
	OnTimeout string     `json:"on_timeout"`
	OpenedAt  time.Time  `json:"opened_at"`
	// RunID is the run that opened the gate; empty for a gate the task
	// was enqueued with.
	RunID  string      `json:"run_id,omitempty"`
	Answer *GateAnswer `json:"answer,omitempty"`
}

// Open reports whether the gate still waits for its answer.
func (g Gate) Open() bool { return g.Answer == nil }

// GateAnswer is how a gate was answered: by whom (a principal id; empty
// for a timeout), when, and with what.
type GateAnswer struct {
	Action     string          `json:"action"`
	Content    json.RawMessage `json:"content,omitempty"`
	AnsweredBy string          `json:"answered_by,omitempty"`
	At         time.Time       `json:"at"`
}
