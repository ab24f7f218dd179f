package core

import (
	"fmt"
	"time"

	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The bounds of the core's parameters (SPEC §1, §3, §5), declared once:
// the API's checks, its description and the MCP tool schemas all read
// them (package input). Rules that depend on state or on the clock (a
// run_at within a year, a blob within the configured size) stay with the
// operations that know them.

// Queue is a queue name; empty or absent is the default queue.
var Queue = input.Match(input.NameFormat).Default(DefaultQueue).Doc(`the queue (default "default")`)

// DefaultQueue is the queue a task goes to, and a claim takes from, when
// none is named.
const DefaultQueue = "default"

// LeaseSecondsBound is a lease's length; absent or 0 is the default.
var LeaseSecondsBound = input.Range(MinLeaseSeconds, MaxLeaseSeconds).Default(DefaultLeaseSeconds).
	Doc(fmt.Sprintf("the lease's length in seconds, %d–%d (default %d)", MinLeaseSeconds, MaxLeaseSeconds, DefaultLeaseSeconds))

func (EnqueueParams) Bounds() input.Bounds {
	return input.Bounds{
		"queue":        Queue,
		"title":        input.Line(1, MaxTitleLen).Doc("a short title for the task, one line"),
		"brief":        input.Text(MaxBriefLen).Doc("instructions for whoever works the task"),
		"payload":      input.JSON(MaxPayloadLen).Doc("the task's input"),
		"labels":       input.List(0, MaxLabels, input.Match(input.NameFormat)).Doc("labels to filter tasks by"),
		"priority":     input.Range(-MaxPriority, MaxPriority).Doc("higher priority tasks are claimed first (default 0)"),
		"public":       input.Bound{}.Doc("show the task on the public board"),
		"max_attempts": input.Range(1, MaxMaxAttempts).Doc("how many claims the task may use before it is dead (default 3)"),
		"run_at":       input.Bound{}.Doc("RFC 3339 time before which the task is not claimed (at most a year ahead)"),
		"after": input.List(0, MaxParents, input.Match(input.NameFormat)).
			Doc(fmt.Sprintf("up to %d tasks this one waits on (their ids, or in a batch the refs of earlier tasks): it stays waiting until all have succeeded", MaxParents)),
		"on_parent_failure": input.Enum(tessera.ParentFailureCancel, tessera.ParentFailureRun).
			Doc(`what the task does when a parent ends dead or canceled: "cancel" (default) cancels it and its own dependents; "run" counts that parent as finished`),
		"ref":      input.Match(input.NameFormat).Doc("a name for this task, unique in its batch, that later tasks of the batch can wait on in their after"),
		"requires": requiresBound,
		"group":    groupBound,
		"gates": input.List(0, MaxTaskGates, input.Bound{}).
			Doc("gates the task starts on, each {key, kind, message, schema, url, timeout_seconds, on_timeout}: it is gated, claimable once they are answered"),
		"unique_key": input.Line(1, MaxUniqueKeyLen).
			Doc(fmt.Sprintf("up to %d bytes: while an unfinished task of the queue holds this key, the enqueue answers that task (deduplicated: true, status 200) instead of a new one; the key is free again once it finishes", MaxUniqueKeyLen)),
		"parent_results": input.Bound{}.Doc(fmt.Sprintf("with after: every claim of the task carries parents, each parent's {task_id, outcome, result, error}, results inline up to %d KiB each and %d KiB in all (past that result_omitted, for GET /v1/tasks/{task_id})", MaxInlineParentResult>>10, MaxInlineParentResults>>10)),
		"debounce":       input.Bound{}.Doc("{key, seconds, max_seconds?}: while the task the key points at in the queue has not been claimed, the enqueue gives it this title, brief and payload and puts it seconds ahead (no later than max_seconds after its first enqueue), answering it with debounced: true (status 200); once it has been claimed, the enqueue makes a new task. Not with unique_key or run_at"),
		"trace":          input.Bound{}.Doc("the W3C trace context the task is enqueued in, {traceparent, tracestate}, which every claim of it hands the worker (over HTTP the traceparent and tracestate headers give it)"),
	}
}

// Debounce windows: a burst is gathered for at most a day, its last
// enqueue's wait at most a week after its first.
const (
	MaxDebounceSeconds    = 24 * 60 * 60
	MaxDebounceMaxSeconds = 7 * MaxDebounceSeconds
)

func (Debounce) Bounds() input.Bounds {
	return input.Bounds{
		"key": input.Line(1, MaxUniqueKeyLen).Doc(fmt.Sprintf("up to %d bytes, one line: enqueues of one key in a queue gather into one task", MaxUniqueKeyLen)),
		"seconds": input.Range(1, MaxDebounceSeconds).
			Doc(fmt.Sprintf("1–%d: the task runs this long after the burst's last enqueue", MaxDebounceSeconds)),
		"max_seconds": input.Range(1, MaxDebounceMaxSeconds).
			Doc(fmt.Sprintf("1–%d, at least seconds: the task runs no later than this long after the burst's first enqueue, however long the burst", MaxDebounceMaxSeconds)),
	}
}

// Trace is a W3C trace context as the API takes it.
type Trace tessera.Trace

// TraceparentFormat is a W3C traceparent of version 00.
var TraceparentFormat = input.NewFormat(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`, 55)

// TracestateFormat is what a tracestate may hold: printable ASCII.
var TracestateFormat = input.NewFormat(fmt.Sprintf(`^[\x20-\x7e]{0,%d}$`, tessera.MaxTracestateLen), tessera.MaxTracestateLen)

func (Trace) Bounds() input.Bounds {
	return input.Bounds{
		"traceparent": input.Match(TraceparentFormat).Doc("version-traceid-parentid-flags, e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
		"tracestate":  input.Match(TracestateFormat).Doc(fmt.Sprintf("vendor entries, up to %d characters", tessera.MaxTracestateLen)),
	}
}

func (EnqueueBatchParams) Bounds() input.Bounds {
	return input.Bounds{"tasks": input.List(1, MaxBatchTasks, input.Bound{}).
		Doc(fmt.Sprintf("1–%d tasks, each with the fields of a single enqueue", MaxBatchTasks))}
}

func (ClaimParams) Bounds() input.Bounds {
	return input.Bounds{
		"queue":         Queue,
		"lease_seconds": LeaseSecondsBound,
		"wait_seconds":  input.Range(0, MaxClaimWait).Doc(fmt.Sprintf("seconds to wait (0–%d) for a task when none is ready", MaxClaimWait)),
		"capabilities":  capabilitiesBound,
	}
}

func (ClaimBatchParams) Bounds() input.Bounds {
	b := ClaimParams{}.Bounds()
	b["max"] = input.Range(1, MaxClaimBatch).Default(1).Doc(fmt.Sprintf("the most leases to grant, 1–%d (default 1)", MaxClaimBatch))
	return b
}

func (SubmitItem) Bounds() input.Bounds {
	b := SubmitParams{}.Bounds()
	b["task_id"] = input.ID("task").Doc("the task whose run ends")
	return b
}

func (SubmitBatchParams) Bounds() input.Bounds {
	return input.Bounds{"items": input.List(1, MaxClaimBatch, input.Bound{}).
		Doc(fmt.Sprintf("1–%d runs to end, each with submit's fields and its task_id", MaxClaimBatch))}
}

func (HeartbeatParams) Bounds() input.Bounds {
	return input.Bounds{
		"lease_token":   leaseTokenBound,
		"lease_seconds": LeaseSecondsBound.Default(nil).Doc("renew by this many seconds from now (default: the lease's own length)"),
		"progress":      input.JSON(MaxProgressLen).Doc("a progress report, shown on the task"),
		"checkpoint":    input.JSON(MaxCheckpointLen).Doc("what the run has done so far: the next attempt's claim returns it as previous_checkpoint, to resume from"),
	}
}

// leaseTokenBound bounds a lease token: a token of another shape is no
// lease, which is lease_lost rather than a bad request.
var leaseTokenBound = input.Text(MaxLeaseTokenLen).Else(tessera.ErrLeaseLost).Doc("the token of your lease (lease.token of the claim)")

// MaxCheckpointLen bounds a checkpoint, as a record value is bounded.
const MaxCheckpointLen = 64 << 10

// MaxLeaseTokenLen bounds a lease token, far above what a claim issues.
const MaxLeaseTokenLen = 128

func (SubmitParams) Bounds() input.Bounds {
	return input.Bounds{
		"lease_token":      leaseTokenBound,
		"outcome":          input.Enum(tessera.OutcomeSucceeded, tessera.OutcomeFailed).Doc(`"succeeded", or "failed" to be retried with backoff until the attempts run out`),
		"result":           input.JSON(MaxResultLen).Doc("the run's result"),
		"error":            input.Text(MaxErrorLen).Doc("what went wrong, for a failed outcome"),
		"cooldown_seconds": cooldownBound,
	}
}

func (ReleaseParams) Bounds() input.Bounds {
	return input.Bounds{"lease_token": leaseTokenBound, "cooldown_seconds": cooldownBound}
}

func (PutRecordParams) Bounds() input.Bounds {
	return input.Bounds{
		"value":       input.CompactJSON(MaxValueLen).Doc("the record's value"),
		"if_version":  input.AtLeast(0).Doc("write only if the current version is this (0: only if the record does not exist)"),
		"lease_token": leaseTokenBound.Doc("your lease's token: binds the version to your run of the task"),
	}
}

func (BucketParams) Bounds() input.Bounds {
	return input.Bounds{"public": input.Bound{}.Doc("show the bucket's record heads on the board")}
}

func (DeclareBlobParams) Bounds() input.Bounds {
	return input.Bounds{
		"sha256":       input.Match(input.SHA256Format).Doc("the bytes' SHA-256 as 64 hex digits, or the ref sha256:<hex>"),
		"size":         input.AtLeast(0).Doc("the bytes' length"),
		"content_type": input.Text(MaxContentTypeLen).Doc("the bytes' media type (default application/octet-stream)"),
		"lease_token":  leaseTokenBound.Doc("your lease's token: binds the blob to your run of the task"),
		"raw_policy":   RawPolicy,
	}
}

// RawPolicy is who may read a namespace's raw blob bytes; the first upload
// sets it.
var RawPolicy = input.Enum(tessera.RawPrivate, tessera.RawNamespace).
	Doc("who may read raw bytes of the namespace, set by its first upload: private (the uploader) or namespace (any key with read); absent keeps it")

func (NamespaceSettingsParams) Bounds() input.Bounds {
	return input.Bounds{"raw_policy": RawPolicy}
}

var (
	principalKind = input.Enum(tessera.KindUser, tessera.KindAgent, tessera.KindService).Doc("who acts: a user, an agent or a service")
	account       = input.Line(0, MaxAccountLen).Doc("the owning account, free text")
	displayName   = input.Line(0, MaxDisplayNameLen).Doc("a name to show, one line")
)

func (PrincipalParams) Bounds() input.Bounds {
	return input.Bounds{"kind": principalKind, "account": account, "display_name": displayName}
}

func (PrincipalPatch) Bounds() input.Bounds {
	return input.Bounds{"kind": principalKind, "account": account, "display_name": displayName}
}

func (KeyParams) Bounds() input.Bounds {
	return input.Bounds{
		"principal_id": input.Match(input.IDFormat).Doc("the principal the key acts as"),
		"scopes":       input.List(1, MaxScopes, input.Match(input.ScopeFormat)).Doc("what the key may do where: admin, or namespace:<name> or namespace:* with read, enqueue, claim, write"),
		"expires_at":   input.Bound{}.Doc("when the key stops working (none: never)"),
	}
}

// gateKeyBound is a gate's key: a name, unique for its task's life.
var gateKeyBound = input.Match(input.NameFormat).Doc("the gate's name, unique for the task's life: its answer comes back under it")

// gateFields are the bounds of a gate's own fields, in GateSpec and in
// GateParams alike.
func gateFields() input.Bounds {
	return input.Bounds{
		"key":     gateKeyBound,
		"kind":    input.Enum(tessera.GateForm, tessera.GateURL, tessera.GateApproval).Doc(`"form" (an answer matching schema), "url" (the person is sent to url) or "approval" (accept or decline); default from what is given`),
		"message": input.Text(MaxGateMessageLen).Doc("what the person answering is asked"),
		"schema": input.JSON(MaxGateSchemaLen).Doc("a form's answer as the MCP elicitation's restricted JSON Schema: " +
			"{type: object, properties: {name: {type: string|number|integer|boolean, …} or a multi-select array}, required: […]}"),
		"url":             input.Text(MaxGateURLLen).Doc("the http(s) URL a url gate sends the person to"),
		"timeout_seconds": input.Range(0, int64(MaxGateTimeout/time.Second)).Doc("seconds until an unanswered gate times out (0: never; at most 30 days)"),
		"on_timeout":      input.Enum(tessera.OnTimeoutFail, tessera.OnTimeoutContinue).Doc(`what a timeout does: "fail" (default) ends the task dead; "continue" records the timeout as the answer`),
	}
}

func (GateSpec) Bounds() input.Bounds { return gateFields() }

func (GateParams) Bounds() input.Bounds {
	b := gateFields()
	b["lease_token"] = leaseTokenBound
	b["gates"] = input.List(0, MaxTaskGates, input.Bound{}).Doc(fmt.Sprintf("several gates at once (up to %d), each with key, kind, message, schema, url, timeout_seconds, on_timeout", MaxTaskGates))
	b["checkpoint"] = input.JSON(MaxCheckpointLen).Doc("what the run has done so far: the next claim returns it as previous_checkpoint")
	return b
}

func (GateAnswerParams) Bounds() input.Bounds {
	return input.Bounds{
		"action":  input.Enum(tessera.GateAccept, tessera.GateDecline, tessera.GateCancel).Doc(`"accept", "decline" or "cancel", as an elicitation is answered`),
		"content": input.JSON(MaxGateContentLen).Doc("an accepted form's answer: an object matching the gate's schema"),
	}
}
