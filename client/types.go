package client

import (
	"encoding/json"
	"time"
)

// The API's wire types. They mirror the JSON of the HTTP API (see
// /v1/openapi.json) and nothing else: the client knows no server code.

// Task states as clients see them. A waiting task waits for the tasks it
// was enqueued after (EnqueueRequest.After); a gated one for a person to
// answer its gates (Task.Gates).
const (
	StateWaiting   = "waiting"
	StateGated     = "gated"
	StateScheduled = "scheduled"
	StateReady     = "ready"
	StateLeased    = "leased"
	StatePaused    = "paused"
	StateSucceeded = "succeeded"
	StateDead      = "dead"
	StateCanceled  = "canceled"
)

// Submit outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
)

// Trace is a W3C trace context (https://www.w3.org/TR/trace-context/).
type Trace struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// Task is a unit of work.
type Task struct {
	Namespace string          `json:"namespace"`
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	Title     string          `json:"title"`
	Brief     string          `json:"brief"`
	Payload   json.RawMessage `json:"payload"`
	Labels    []string        `json:"labels"`
	Priority  int             `json:"priority"`
	// Requires are the capabilities a claimant must show to be granted
	// the task (sorted); Group is who the task is for. Both are empty for
	// a task anyone may take, outside any group.
	Requires []string `json:"requires,omitempty"`
	Group    string   `json:"group,omitempty"`
	// Trace is the W3C trace context the task was enqueued in: a worker
	// continues its producer's trace from it (tessera work passes it to
	// its command as TRACEPARENT and TRACESTATE).
	Trace *Trace `json:"trace,omitempty"`
	// UniqueKey is the key the task was enqueued with
	// (EnqueueRequest.UniqueKey), if any.
	UniqueKey string `json:"unique_key,omitempty"`
	// DebounceKey is the debounce key the task was enqueued with
	// (EnqueueRequest.Debounce), if any.
	DebounceKey string `json:"debounce_key,omitempty"`
	// ParentResults says claims of the task carry its parents' ends.
	ParentResults   bool            `json:"parent_results,omitempty"`
	Public          bool            `json:"public"`
	MaxAttempts     int             `json:"max_attempts"`
	Attempts        int             `json:"attempts"`
	State           string          `json:"state"`
	RunAt           time.Time       `json:"run_at"`
	CreatedBy       string          `json:"created_by"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	CancelRequested bool            `json:"cancel_requested"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           string          `json:"error,omitempty"`
	Progress        json.RawMessage `json:"progress,omitempty"`
	// FinishedAt is when the task reached a terminal state (succeeded,
	// dead, canceled); retention deletes it some time after.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Lease      *Lease     `json:"lease,omitempty"`
	// LeaseLapsed says the lease is past its expiry: the task goes back
	// to its queue (or dies) as soon as a claim or its holder notices.
	LeaseLapsed bool  `json:"lease_lapsed,omitempty"`
	Runs        []Run `json:"runs,omitempty"`
	// Dependency is what the task waits on, for a task enqueued after
	// others (EnqueueRequest.After).
	Dependency *Dependency `json:"dependency,omitempty"`
	// Checkpoint is the last a run of the task left (GetTask).
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Gates are the task's gates, open and answered, on GetTask and on
	// the answers of OpenGates and AnswerGate, for a task that had any.
	Gates []Gate `json:"gates,omitempty"`
	// Deduplicated, on an enqueue's answer, says the task is not new: an
	// unfinished task of the queue already held the request's UniqueKey.
	Deduplicated bool `json:"deduplicated,omitempty"`
	// Debounced, on an enqueue's answer, says the task is not new: the
	// request's Debounce key pointed at it, not yet claimed, and the
	// enqueue gave it its title, brief and payload and moved its run_at.
	Debounced bool `json:"debounced,omitempty"`
}

// A gate is a question a task waits on without holding a worker: a run
// parks its task on gates (OpenGates, Job.Gate) or a producer enqueues it
// with them (EnqueueRequest.Gates); the task is gated until every gate is
// answered (AnswerGate) or one times out, and its next claim carries the
// answers (Claim.GateAnswers).

// Gate kinds: what the person answering is shown.
const (
	// GateForm asks for content matching the gate's schema (MCP
	// elicitation's restricted subset: a flat object of primitive fields).
	GateForm = "form"
	// GateURL sends the person to the gate's URL, for what must not pass
	// through Tessera (a sign-in); its answer carries no content.
	GateURL = "url"
	// GateApproval asks for accept or decline alone.
	GateApproval = "approval"
)

// Gate answer actions (MCP elicitation's), and GateTimeout, which a
// timeout records.
const (
	GateAccept  = "accept"
	GateDecline = "decline"
	GateCancel  = "cancel"
	GateTimeout = "timeout"
)

// What an unanswered gate's timeout does to its task.
const (
	// OnTimeoutFail (the default) ends the task dead.
	OnTimeoutFail = "fail"
	// OnTimeoutContinue records GateTimeout as the answer and lets the
	// task run once its other gates are answered.
	OnTimeoutContinue = "continue"
)

// Gate is one of a task's gates, open until Answer is set.
type Gate struct {
	Key     string          `json:"key"`
	Kind    string          `json:"kind"`
	Message string          `json:"message"`
	Schema  json.RawMessage `json:"schema,omitempty"`
	URL     string          `json:"url,omitempty"`
	// TimeoutAt is when the gate times out unanswered; nil for never.
	TimeoutAt *time.Time `json:"timeout_at,omitempty"`
	OnTimeout string     `json:"on_timeout"`
	OpenedAt  time.Time  `json:"opened_at"`
	// RunID is the run that opened the gate; empty for one the task was
	// enqueued with.
	RunID  string      `json:"run_id,omitempty"`
	Answer *GateAnswer `json:"answer,omitempty"`
}

// GateAnswer is how a gate was answered: Action (GateAccept, GateDecline,
// GateCancel or GateTimeout), Content for an accepted form, by whom (a
// principal id; empty for a timeout) and when. A decline is an answer,
// not a failure: the run that reads it decides what it means.
type GateAnswer struct {
	Action     string          `json:"action"`
	Content    json.RawMessage `json:"content,omitempty"`
	AnsweredBy string          `json:"answered_by,omitempty"`
	At         time.Time       `json:"at"`
}

// GateSpec is a gate to open. Kind defaults to GateURL when URL is set,
// GateForm when Schema is, else GateApproval. Key names the gate in the
// answers, and is unique for the task's life.
type GateSpec struct {
	Key     string `json:"key"`
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
	// Schema is a form's, any JSON value: a map, a struct,
	// json.RawMessage.
	Schema any    `json:"schema,omitempty"`
	URL    string `json:"url,omitempty"`
	// TimeoutSeconds (0: never) and OnTimeout (OnTimeoutFail or
	// OnTimeoutContinue) say what becomes of a gate nobody answers.
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
	OnTimeout      string `json:"on_timeout,omitempty"`
}

// Dependency is a task's parents and how many have not finished.
type Dependency struct {
	After           []string `json:"after"`
	WaitingOn       int      `json:"waiting_on"`
	OnParentFailure string   `json:"on_parent_failure"`
	// FailedParent is the first parent that ended dead or canceled.
	FailedParent string `json:"failed_parent,omitempty"`
	// CanceledBy is the parent whose failure canceled the task.
	CanceledBy string `json:"canceled_by,omitempty"`
}

// Checkpoint is what a run left for the next attempt to resume from.
type Checkpoint struct {
	Value   json.RawMessage `json:"value"`
	Attempt int             `json:"attempt"`
	RunID   string          `json:"run_id"`
	At      time.Time       `json:"at"`
}

// Lease is a claim on a task. Token is set only in a claim's answer.
type Lease struct {
	TaskID    string    `json:"task_id"`
	RunID     string    `json:"run_id"`
	Holder    string    `json:"holder"`
	ExpiresAt time.Time `json:"expires_at"`
	Token     string    `json:"token,omitempty"`
	Seconds   int       `json:"lease_seconds"`
}

// Run is one attempt at a task.
type Run struct {
	ID        string     `json:"run_id"`
	TaskID    string     `json:"task_id"`
	Holder    string     `json:"holder"`
	Attempt   int        `json:"attempt"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Outcome   string     `json:"outcome,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// EnqueueRequest is the body of POST /v1/tasks. Payload is any JSON
// value (json.RawMessage, a struct, a map).
type EnqueueRequest struct {
	Queue       string     `json:"queue,omitempty"`
	Title       string     `json:"title"`
	Brief       string     `json:"brief,omitempty"`
	Payload     any        `json:"payload,omitempty"`
	Labels      []string   `json:"labels,omitempty"`
	Priority    int        `json:"priority,omitempty"`
	Public      bool       `json:"public,omitempty"`
	MaxAttempts int        `json:"max_attempts,omitempty"`
	RunAt       *time.Time `json:"run_at,omitempty"`
	// After are the tasks this one waits on: ids or, in a batch, the Ref
	// of an earlier task. It stays waiting until all have succeeded.
	After []string `json:"after,omitempty"`
	// OnParentFailure is what it does when a parent ends dead or
	// canceled: "cancel" (the default) or "run".
	OnParentFailure string `json:"on_parent_failure,omitempty"`
	// Ref names the task within its batch, for later tasks' After.
	Ref string `json:"ref,omitempty"`
	// Requires are capabilities (up to 16, each 1–64 of [a-z0-9._:/-]) a
	// claimant must show (ClaimRequest.Capabilities) to be granted the
	// task: a GPU, a checkout of a repository.
	Requires []string `json:"requires,omitempty"`
	// Group is who the task is for (a tenant, a repository; up to 128
	// bytes): claims rotate across a queue's groups, and a group's live
	// leases and rate may be capped (SetQueueSettings, SetGroupSettings).
	Group string `json:"group,omitempty"`
	// Trace is the W3C trace context to enqueue the task in (the
	// producer's current span), handed to every worker that claims it.
	Trace *Trace `json:"trace,omitempty"`
	// Gates start the task gated: it is claimable once they are answered.
	// A task waits on parents (After) or on gates, not both.
	Gates []GateSpec `json:"gates,omitempty"`
	// UniqueKey (up to 200 bytes) keeps one unfinished task per key in
	// the queue: while one holds it, the enqueue answers that task, with
	// Deduplicated set, instead of a new one. Once it finishes, the key
	// makes a new task again.
	UniqueKey string `json:"unique_key,omitempty"`
	// Debounce gathers a burst of enqueues into one task; not with
	// UniqueKey or RunAt.
	Debounce *Debounce `json:"debounce,omitempty"`
	// ParentResults, with After, hands every claim of the task its
	// parents' outcomes and results (Claim.Parents, Job.Parents).
	ParentResults bool `json:"parent_results,omitempty"`
	// IdempotencyKey is sent as the header; one is generated when empty.
	IdempotencyKey string `json:"-"`
}

// Debounce gathers a burst of enqueues of one Key in a queue into one
// task: while the task the key points at has not been claimed, each
// enqueue gives it its title, brief and payload and puts it Seconds
// (1–86,400) ahead, but no later than MaxSeconds (optional, at least
// Seconds) after the burst's first enqueue. Once it has been claimed the
// next enqueue makes a new task.
type Debounce struct {
	Key        string `json:"key"`
	Seconds    int    `json:"seconds"`
	MaxSeconds int    `json:"max_seconds,omitempty"`
}

// What a task does when a parent ends dead or canceled.
const (
	ParentFailureCancel = "cancel"
	ParentFailureRun    = "run"
)

// MaxBatchTasks is the most tasks one EnqueueBatch may carry (the API's
// limit, beside its 1 MiB body limit).
const MaxBatchTasks = 500

// EnqueueBatchRequest is the body of POST /v1/tasks/batch.
type EnqueueBatchRequest struct {
	Tasks []EnqueueRequest `json:"tasks"`
	// IdempotencyKey is sent as the header, for the whole batch; one is
	// generated when empty.
	IdempotencyKey string `json:"-"`
}

// TaskFilter selects tasks for ListTasks.
type TaskFilter struct {
	State, Queue, Label string
	// Title keeps tasks whose title contains it (ASCII letters in any
	// case); CreatedAfter and CreatedBefore bound when they were made.
	Title                       string
	CreatedAfter, CreatedBefore time.Time
	Limit                       int
	Cursor                      string
}

// TaskPage is a page of tasks, newest first.
type TaskPage struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// TaskEvent is something the holder of a task's lease should learn.
type TaskEvent struct {
	Seq  int64     `json:"seq"`
	Kind string    `json:"kind"`
	Body string    `json:"body,omitempty"`
	By   string    `json:"by,omitempty"`
	Time time.Time `json:"time"`
}

// Counts maps queue → state → number of tasks.
type Counts map[string]map[string]int

// ClaimRequest is the body of POST /v1/claims.
type ClaimRequest struct {
	Queue        string `json:"queue,omitempty"`
	LeaseSeconds int    `json:"lease_seconds,omitempty"`
	// WaitSeconds (0–20) long-polls for a task to arrive.
	WaitSeconds int `json:"wait_seconds,omitempty"`
	// Capabilities (up to 64) are what the claimant has: only tasks whose
	// Requires are all among them are granted. None takes only tasks
	// that require nothing.
	Capabilities []string `json:"capabilities,omitempty"`
}

// Claim is a granted claim: the lease (with its token) and the task.
type Claim struct {
	Lease Lease `json:"lease"`
	Task  Task  `json:"task"`
	// PreviousCheckpoint is what an earlier attempt at the task left to
	// resume from (HeartbeatRequest.Checkpoint); nil when none did.
	PreviousCheckpoint *Checkpoint `json:"previous_checkpoint,omitempty"`
	// GateAnswers are the answers to the task's gates, by key, for a task
	// that had gates; nil otherwise.
	GateAnswers map[string]GateAnswer `json:"gate_answers,omitempty"`
	// Parents are the ends of the tasks this one was enqueued after, in
	// its After's order, for a task enqueued with ParentResults.
	Parents []ParentResult `json:"parents,omitempty"`
}

// ParentResult is a parent's end: Outcome is the state it finished in
// (succeeded; dead or canceled under OnParentFailure "run"; "purged" when
// retention deleted it since). Its Result is inline up to 64 KiB, and
// while the claim's inline results stay within 1 MiB; past that
// ResultOmitted is set and GetTask(TaskID) reads it.
type ParentResult struct {
	TaskID        string          `json:"task_id"`
	Outcome       string          `json:"outcome"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         string          `json:"error,omitempty"`
	ResultOmitted bool            `json:"result_omitted,omitempty"`
}

// HeartbeatRequest extends a lease. Progress is any JSON value (≤ 4 KiB);
// Checkpoint (any JSON value ≤ 64 KiB) is stored for the next attempt to
// resume from, should this run not finish.
type HeartbeatRequest struct {
	LeaseToken   string `json:"lease_token"`
	LeaseSeconds int    `json:"lease_seconds,omitempty"`
	Progress     any    `json:"progress,omitempty"`
	Checkpoint   any    `json:"checkpoint,omitempty"`
}

// Heartbeat is a heartbeat's answer. After a requested cancel the run is
// over: CancelRequested is true and ExpiresAt nil.
type Heartbeat struct {
	TaskID          string     `json:"task_id"`
	State           string     `json:"state"`
	ExpiresAt       *time.Time `json:"expires_at"`
	CancelRequested bool       `json:"cancel_requested"`
}

// SubmitRequest ends a run. Result is any JSON value (≤ 256 KiB).
type SubmitRequest struct {
	LeaseToken string `json:"lease_token"`
	Outcome    string `json:"outcome"`
	Result     any    `json:"result,omitempty"`
	Error      string `json:"error,omitempty"`
	// CooldownSeconds (0–86400) pauses the task's group that long once
	// the run ends, e.g. after an upstream 429: its ready tasks wait, the
	// rest of the queue flows. A task without a group refuses it
	// (invalid_request).
	CooldownSeconds int `json:"cooldown_seconds,omitempty"`
	// IdempotencyKey is sent as the header; one is generated when empty.
	IdempotencyKey string `json:"-"`
}

// ReleaseRequest gives a task back without using an attempt
// (ReleaseWith).
type ReleaseRequest struct {
	LeaseToken string `json:"lease_token"`
	// CooldownSeconds (0–86400) pauses the task's group that long, as
	// SubmitRequest's does.
	CooldownSeconds int `json:"cooldown_seconds,omitempty"`
}

// GateRequest parks a leased task on gates (OpenGates).
type GateRequest struct {
	LeaseToken string     `json:"lease_token"`
	Gates      []GateSpec `json:"gates"`
	// Checkpoint (any JSON value ≤ 64 KiB) is what the run has done so
	// far: the claim that follows the answers returns it as
	// PreviousCheckpoint.
	Checkpoint any `json:"checkpoint,omitempty"`
}

// GateAnswerRequest answers a gate (AnswerGate): Action GateAccept (with
// Content, any JSON value matching a form's schema), GateDecline or
// GateCancel.
type GateAnswerRequest struct {
	Action  string `json:"action"`
	Content any    `json:"content,omitempty"`
}

// SubmitBatchRequest ends several runs (SubmitBatch).
type SubmitBatchRequest struct {
	Items []SubmitItem `json:"items"`
	// IdempotencyKey is sent as the header; one is generated when empty.
	IdempotencyKey string `json:"-"`
}

// SubmitItem is one run a SubmitBatch ends: its task and its outcome.
type SubmitItem struct {
	TaskID string `json:"task_id"`
	SubmitRequest
}

// SubmitResult is one item's outcome: the task as its submit left it, or
// Err (an *Error: lease_lost, not_found) when the item was refused.
type SubmitResult struct {
	TaskID string     `json:"task_id"`
	Task   *Task      `json:"task,omitempty"`
	Error  *ItemError `json:"error,omitempty"`
	Err    error      `json:"-"`
}

// ItemError is why the server refused one item of a batch.
type ItemError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ClaimEvents is the answer of the claim-events long-poll.
type ClaimEvents struct {
	Events          []TaskEvent `json:"events"`
	NextSince       int64       `json:"next_since"`
	State           string      `json:"state"`
	CancelRequested bool        `json:"cancel_requested"`
	Lease           *Lease      `json:"lease"`
}

// Record is one version of a JSON document at bucket/key.
type Record struct {
	Bucket    string          `json:"bucket"`
	Key       string          `json:"key"`
	Version   int64           `json:"version"`
	Value     json.RawMessage `json:"value,omitempty"`
	RunID     string          `json:"run_id,omitempty"`
	TaskID    string          `json:"task_id,omitempty"`
	WrittenBy string          `json:"written_by"`
	CreatedAt time.Time       `json:"created_at"`
}

// PutRecordRequest writes the next version of a record.
type PutRecordRequest struct {
	Value any `json:"value"`
	// IfVersion writes only if the head is that version (0: only if the
	// record does not exist yet).
	IfVersion *int64 `json:"if_version,omitempty"`
	// LeaseToken binds the version to the lease's run.
	LeaseToken string `json:"lease_token,omitempty"`
	// IdempotencyKey is sent as the header; one is generated when empty.
	IdempotencyKey string `json:"-"`
}

// RecordPage is a page of record heads (ListRecords) or versions.
type RecordPage struct {
	Records    []Record `json:"records"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// VersionPage is a page of one record's versions, newest first.
type VersionPage struct {
	Versions   []Record `json:"versions"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// Bucket is a named group of records.
type Bucket struct {
	Name      string    `json:"name"`
	Public    bool      `json:"public"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// BucketPage is a page of buckets by name.
type BucketPage struct {
	Buckets    []Bucket `json:"buckets"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// Page selects a page of a listing.
type Page struct {
	Cursor string
	Limit  int
}

// DeclareBlobRequest declares an upload (the first of three calls).
type DeclareBlobRequest struct {
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type,omitempty"`
	// RawPolicy (private or namespace) is fixed by a namespace's first upload.
	RawPolicy string `json:"raw_policy,omitempty"`
	// LeaseToken binds the blob to the lease's run.
	LeaseToken string `json:"lease_token,omitempty"`
}

// BlobDeclared answers a declare: an upload to send, or Exists with Ref.
type BlobDeclared struct {
	Exists    bool       `json:"exists"`
	Ref       string     `json:"ref,omitempty"`
	UploadID  string     `json:"upload_id,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	MaxBytes  int64      `json:"max_bytes,omitempty"`
}

// UploadReceived answers the byte upload.
type UploadReceived struct {
	UploadID string `json:"upload_id"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Matches  bool   `json:"matches"`
}

// BlobInfo is a blob's metadata.
type BlobInfo struct {
	Ref         string    `json:"ref"`
	SHA256      string    `json:"sha256"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	UploadedBy  string    `json:"uploaded_by"`
	RunID       string    `json:"run_id,omitempty"`
	TaskID      string    `json:"task_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// NamespaceSettings are a namespace's settings.
type NamespaceSettings struct {
	Namespace string    `json:"namespace"`
	RawPolicy string    `json:"raw_policy"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Namespace is a namespace the store knows.
type Namespace struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// NamespacePage is a page of namespaces by name.
type NamespacePage struct {
	Namespaces []Namespace `json:"namespaces"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// Purged answers a namespace purge.
type Purged struct {
	Namespace   string `json:"namespace"`
	RowsDeleted int    `json:"rows_deleted"`
}

// Principal is who acts.
type Principal struct {
	ID          string     `json:"id"`
	Kind        string     `json:"kind"`
	Account     string     `json:"account"`
	DisplayName string     `json:"display_name"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	PurgeAt     *time.Time `json:"purge_at,omitempty"`
}

// PrincipalRequest creates a principal: kind user, agent or service.
type PrincipalRequest struct {
	Kind        string `json:"kind"`
	Account     string `json:"account,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
}

// PrincipalPatch changes a principal; nil fields stay as they are.
type PrincipalPatch struct {
	Kind        *string `json:"kind,omitempty"`
	Account     *string `json:"account,omitempty"`
	DisplayName *string `json:"display_name,omitempty"`
}

// PrincipalPage is a page of principals.
type PrincipalPage struct {
	Principals []Principal `json:"principals"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// Key is a key's metadata (never its secret).
type Key struct {
	ID          string     `json:"id"`
	PrincipalID string     `json:"principal_id"`
	Scopes      []string   `json:"scopes"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

// NewKey is a created key: its metadata and, this once, the key itself.
type NewKey struct {
	Key
	Secret string `json:"key"`
}

// KeyRequest creates a key for a principal. Scopes are actions (read,
// enqueue, claim, write, admin) and grants (namespace:NAME, namespace:*).
type KeyRequest struct {
	PrincipalID string     `json:"principal_id"`
	Scopes      []string   `json:"scopes"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

// KeyPage is a page of keys.
type KeyPage struct {
	Keys       []Key  `json:"keys"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Me is the caller's principal and key.
type Me struct {
	Principal  Principal  `json:"principal"`
	KeyID      string     `json:"key_id"`
	Scopes     []string   `json:"scopes"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// AuditEvent is one successful action.
type AuditEvent struct {
	ID          string    `json:"id"`
	Time        time.Time `json:"time"`
	Namespace   string    `json:"namespace"`
	PrincipalID string    `json:"principal_id"`
	KeyID       string    `json:"key_id"`
	Action      string    `json:"action"`
	Target      string    `json:"target"`
	RunID       string    `json:"run_id,omitempty"`
	// TaskID is the task the action was about or done under, Queue its
	// queue, State the state it left the task in.
	TaskID string `json:"task_id,omitempty"`
	Queue  string `json:"queue,omitempty"`
	State  string `json:"state,omitempty"`
	Status int    `json:"status"`
	IPHash string `json:"ip_hash"`
}

// AuditCounter counts what is not an event (denials, failures, empty
// claims) per minute, principal, namespace, action and outcome.
type AuditCounter struct {
	Minute      time.Time `json:"minute"`
	PrincipalID string    `json:"principal_id"`
	Namespace   string    `json:"namespace"`
	Action      string    `json:"action"`
	Outcome     string    `json:"outcome"`
	Count       int64     `json:"count"`
}

// AuditPage is a page of audit events, with the counters on the first.
type AuditPage struct {
	Events     []AuditEvent   `json:"events"`
	Counters   []AuditCounter `json:"counters"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// AuditFilter selects audit events and counters (the last 24 h).
type AuditFilter struct {
	// Namespace and Principal filter the admin audit only.
	Namespace, Principal string
	Action, Outcome      string
	Since                *time.Time
	Cursor               string
	Limit                int
}

// StorageTotals are today's metered storage rows and the allowance.
type StorageTotals struct {
	Day         string    `json:"day"`
	RowsWritten int64     `json:"rows_written"`
	RowsRead    int64     `json:"rows_read"`
	ResetAt     time.Time `json:"reset_at"`
	Allowance   Allowance `json:"allowance"`
}

// Allowance is a daily storage allowance (0 = unlimited).
type Allowance struct {
	RowsWrittenPerDay int64 `json:"rows_written_per_day"`
	RowsReadPerDay    int64 `json:"rows_read_per_day"`
}

// Health is a namespace's public health snapshot.
type Health struct {
	Status    string        `json:"status"`
	Namespace string        `json:"namespace"`
	Time      time.Time     `json:"time"`
	Queues    []QueueHealth `json:"queues"`
	Totals    HealthTotals  `json:"totals"`
}

// HealthTotals sums the queues of Health.
type HealthTotals struct {
	Counts        map[string]int `json:"counts"`
	LiveLeases    int            `json:"live_leases"`
	ExpiredLeases int            `json:"expired_leases"`
}

// QueueHealth is one queue's public health.
type QueueHealth struct {
	Queue                 string         `json:"queue"`
	Counts                map[string]int `json:"counts"`
	LiveLeases            int            `json:"live_leases"`
	ExpiredLeases         int            `json:"expired_leases"`
	OldestReadyAgeSeconds *float64       `json:"oldest_ready_age_seconds"`
}

// Healthz is the liveness answer.
type Healthz struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
}

// Board is the public board.
type Board struct {
	Namespace string                 `json:"namespace"`
	Time      time.Time              `json:"time"`
	Health    Health                 `json:"health"`
	Tasks     map[string][]BoardTask `json:"tasks"`
	TaskLimit int                    `json:"task_limit"`
	Buckets   []BoardBucket          `json:"buckets"`
}

// BoardTask is a public task on the board.
type BoardTask struct {
	ID        string    `json:"id"`
	Queue     string    `json:"queue"`
	Title     string    `json:"title"`
	State     string    `json:"state"`
	Priority  int       `json:"priority"`
	RunAt     time.Time `json:"run_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// BoardBucket is a public bucket with its record heads.
type BoardBucket struct {
	Name    string        `json:"name"`
	Records []BoardRecord `json:"records"`
}

// BoardRecord is a record head on the board.
type BoardRecord struct {
	Key        string          `json:"key"`
	Version    int64           `json:"version"`
	Value      json.RawMessage `json:"value,omitempty"`
	ValueBytes int             `json:"value_bytes"`
	UpdatedAt  time.Time       `json:"updated_at"`
	TaskID     string          `json:"task_id,omitempty"`
}

// ActivityPage is a page of public events, newest first.
type ActivityPage struct {
	Events     []ActivityEvent `json:"events"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// ActivityEvent is a redacted public event.
type ActivityEvent struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Summary string    `json:"summary"`
	Target  string    `json:"target"`
	Title   string    `json:"title,omitempty"`
	RunID   string    `json:"run_id,omitempty"`
	By      string    `json:"by"`
	ByKind  string    `json:"by_kind,omitempty"`
}
