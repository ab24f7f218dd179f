package tessera

import "time"

// AuditEvent is the redacted record of one successful action (SPEC §9).
// It never holds secrets, lease tokens, payloads, values or raw addresses.
type AuditEvent struct {
	ID          string    `json:"id"`
	Time        time.Time `json:"time"`
	Namespace   string    `json:"namespace"`
	PrincipalID string    `json:"principal_id"`
	KeyID       string    `json:"key_id"`
	Action      string    `json:"action"`
	Target      string    `json:"target"`
	RunID       string    `json:"run_id,omitempty"`
	// TaskID is the task the action was about or was done under (a
	// record written under its lease), Queue that task's queue, and
	// State the state the action left it in (none when it did not change
	// it): what the live event stream tells without reading the task.
	TaskID string `json:"task_id,omitempty"`
	Queue  string `json:"queue,omitempty"`
	State  string `json:"state,omitempty"`
	Status int    `json:"status"`
	IPHash string `json:"ip_hash"`
	// Public marks an event about public work, shown on the activity feed.
	Public bool `json:"-"`
}

// Anonymous is the principal id counters use when no key was recognized.
const Anonymous = "anonymous"

// AuditCounter counts what is not an event — denials, failures, 429s,
// empty claims, long-poll timeouts — per minute, principal, namespace,
// action and outcome.
type AuditCounter struct {
	Minute      time.Time `json:"minute"`
	Namespace   string    `json:"namespace"`
	PrincipalID string    `json:"principal_id"`
	Action      string    `json:"action"`
	Outcome     string    `json:"outcome"`
	Count       int64     `json:"count"`
}

// NamespaceIdentity is a principal as last seen in a namespace, kept for
// attribution on the board and the activity feed (SPEC §8).
type NamespaceIdentity struct {
	Namespace   string
	PrincipalID string
	Account     string
	Kind        string
	DisplayName string
	SeenAt      time.Time
}
