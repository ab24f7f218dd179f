package core

import (
	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Audit action names: one per operation, shared by events (successes) and
// counters (everything else), whichever adapter the request came through.
const (
	ActMe             = "me.read"
	ActMyAudit        = "me.audit"
	ActTaskEnqueue    = "task.enqueue"
	ActTaskRun        = "task.run"
	ActTaskList       = "task.list"
	ActTaskGet        = "task.get"
	ActTaskCancel     = "task.cancel"
	ActTaskPause      = "task.pause"
	ActTaskResume     = "task.resume"
	ActTaskRetry      = "task.retry"
	ActTaskNote       = "task.note"
	ActTaskDependents = "task.dependents"
	ActCounts         = "task.counts"
	ActClaim          = "claim.grant"
	ActHeartbeat      = "claim.heartbeat"
	ActSubmit         = "claim.submit"
	ActRelease        = "claim.release"
	ActGateOpen       = "claim.gate"
	ActGateAnswer     = "task.gate.answer"
	ActClaimEvents    = "claim.events"
	ActRecordWrite    = "record.write"
	ActRecordRead     = "record.read"
	ActRecordHistory  = "record.versions"
	ActRecordList     = "record.list"
	ActBucketPut      = "bucket.put"
	ActBucketList     = "bucket.list"
	ActBlobDeclare    = "blob.declare"
	ActBlobUpload     = "blob.upload"
	ActBlobCommit     = "blob.commit"
	ActBlobRead       = "blob.read"
	ActBlobMeta       = "blob.meta"
	ActAdminAudit     = "admin.audit"
	ActPrincipalNew   = "admin.principal.create"
	ActPrincipalList  = "admin.principal.list"
	ActPrincipalEdit  = "admin.principal.update"
	ActKeyNew         = "admin.key.create"
	ActKeyList        = "admin.key.list"
	ActKeyRevoke      = "admin.key.revoke"
	ActNamespaceList  = "admin.namespace.list"
	ActNamespaceSet   = "admin.namespace.settings"
	ActNamespaceGet   = "admin.namespace.settings.read"
	ActNamespacePurge = "admin.namespace.purge"
	ActHealth         = "public.health"
	ActHealthz        = "public.healthz"
	ActBoard          = "public.board"
	ActActivity       = "public.activity"
	ActStorage        = "admin.storage"
	ActAllowance      = "admin.storage.allowance"
	ActMetrics        = "admin.metrics"
	ActSessionStart   = "session.start"
	ActAccessModes    = "access.modes"
	// ActBlobPut is MCP's upload in one call (declare, bytes, commit); its
	// success is evented as the commit it ends with.
	ActBlobPut = "blob.put"
)

// The live event stream and the operator console's operations (issue 29).
const (
	ActEvents      = "events.stream"
	ActTaskTrail   = "task.trail"
	ActTaskBulk    = "task.bulk"
	ActQueueList   = "queue.list"
	ActQueuePause  = "queue.pause"
	ActQueueResume = "queue.resume"
	ActQueuePurge  = "queue.purge"
	// The fleet's (issue 31): a queue's fleet view and its settings.
	ActQueueFleet    = "queue.fleet"
	ActQueueSettings = "queue.settings"
	ActGroupSettings = "queue.group_settings"
	// ActTaskLapse names no operation: it is the event of a lease that
	// lapsed, written by whichever transaction noticed it (event.go).
	ActTaskLapse = "task.lapse"
	// ActGateTimeout names no operation either: it is the event of a gate
	// that timed out, made by the node whose timer saw it first.
	ActGateTimeout = "task.gate.timeout"
)

// ActTaskEnqueueBatch names a batch enqueue (POST /v1/tasks/batch) in
// counters, and for its Need. Each task it enqueues is evented as
// ActTaskEnqueue, as a single enqueue of it would be.
const ActTaskEnqueueBatch = "task.enqueue_batch"

// ActClaimBatch and ActSubmitBatch name a batch claim and a batch submit
// in counters, and for their Need. Each lease a batch grants is evented as
// ActClaim, each run it ends as ActSubmit, as a single claim or submit
// would be.
const (
	ActClaimBatch  = "claim.grant_batch"
	ActSubmitBatch = "claim.submit_batch"
)

// Need is what an operation needs of a key (§4): a grant for the
// namespace and an action scope, or the admin scope, or just a valid key.
type Need struct {
	// Keyless operations take no key at all (minting a session).
	Keyless bool
	// Grant asks for a grant for the namespace.
	Grant bool
	// Action is the action scope; "" for none beyond the grant, or admin.
	Action tessera.Action
}

// needs is each operation's Need: the one table both the edge (before any
// namespace work) and the core (right before the operation, and again
// after any wait) check against, so the two cannot disagree.
var needs = map[string]Need{
	ActSessionStart: {Keyless: true},
	ActAccessModes:  {Keyless: true},
	ActMe:           {},
	ActMyAudit:      {},

	ActTaskEnqueue:    {Grant: true, Action: tessera.ActionEnqueue},
	ActTaskRun:        {Grant: true, Action: tessera.ActionEnqueue},
	ActTaskList:       {Grant: true, Action: tessera.ActionRead},
	ActTaskGet:        {Grant: true, Action: tessera.ActionRead},
	ActTaskCancel:     {Grant: true, Action: tessera.ActionEnqueue},
	ActTaskPause:      {Grant: true, Action: tessera.ActionEnqueue},
	ActTaskResume:     {Grant: true, Action: tessera.ActionEnqueue},
	ActTaskRetry:      {Grant: true, Action: tessera.ActionEnqueue},
	ActTaskDependents: {Grant: true, Action: tessera.ActionRead},
	// Notes come from producers (enqueue) or the lease holder (claim):
	// the grant is checked first, the rest by AddNote.
	ActTaskNote: {Grant: true, Action: ""},
	ActCounts:   {Grant: true, Action: tessera.ActionRead},
	// A batch needs what each of its tasks would.
	ActTaskEnqueueBatch: {Grant: true, Action: tessera.ActionEnqueue},

	ActEvents:        {Grant: true, Action: tessera.ActionRead},
	ActTaskTrail:     {Grant: true, Action: tessera.ActionRead},
	ActQueueList:     {Grant: true, Action: tessera.ActionRead},
	ActTaskBulk:      {Grant: true, Action: tessera.ActionEnqueue},
	ActQueuePause:    {Grant: true, Action: tessera.ActionEnqueue},
	ActQueueResume:   {Grant: true, Action: tessera.ActionEnqueue},
	ActQueuePurge:    {Grant: true, Action: tessera.ActionEnqueue},
	ActQueueFleet:    {Grant: true, Action: tessera.ActionRead},
	ActQueueSettings: {Grant: true, Action: tessera.ActionEnqueue},
	ActGroupSettings: {Grant: true, Action: tessera.ActionEnqueue},

	ActClaim:     {Grant: true, Action: tessera.ActionClaim},
	ActHeartbeat: {Grant: true, Action: tessera.ActionClaim},
	ActSubmit:    {Grant: true, Action: tessera.ActionClaim},
	ActRelease:   {Grant: true, Action: tessera.ActionClaim},
	ActGateOpen:  {Grant: true, Action: tessera.ActionClaim},
	// Answers come from producers' keys (and the MCP client that owns
	// the task's handle, which made it with enqueue).
	ActGateAnswer:  {Grant: true, Action: tessera.ActionEnqueue},
	ActClaimEvents: {Grant: true, Action: tessera.ActionClaim},
	// A batch needs what each of its claims or submits would.
	ActClaimBatch:  {Grant: true, Action: tessera.ActionClaim},
	ActSubmitBatch: {Grant: true, Action: tessera.ActionClaim},

	ActRecordWrite:   {Grant: true, Action: tessera.ActionWrite},
	ActRecordRead:    {Grant: true, Action: tessera.ActionRead},
	ActRecordHistory: {Grant: true, Action: tessera.ActionRead},
	ActRecordList:    {Grant: true, Action: tessera.ActionRead},
	ActBucketPut:     {Grant: true, Action: tessera.ActionWrite},
	ActBucketList:    {Grant: true, Action: tessera.ActionRead},
	ActBlobDeclare:   {Grant: true, Action: tessera.ActionWrite},
	ActBlobUpload:    {Grant: true, Action: tessera.ActionWrite},
	ActBlobCommit:    {Grant: true, Action: tessera.ActionWrite},
	ActBlobPut:       {Grant: true, Action: tessera.ActionWrite},
	ActBlobRead:      {Grant: true, Action: tessera.ActionRead},
	ActBlobMeta:      {Grant: true, Action: tessera.ActionRead},

	ActHealth:   {Grant: true, Action: tessera.ActionRead},
	ActHealthz:  {Grant: true, Action: tessera.ActionRead},
	ActBoard:    {Grant: true, Action: tessera.ActionRead},
	ActActivity: {Grant: true, Action: tessera.ActionRead},

	ActAdminAudit:     {Grant: false, Action: tessera.ActionAdmin},
	ActPrincipalNew:   {Grant: false, Action: tessera.ActionAdmin},
	ActPrincipalList:  {Grant: false, Action: tessera.ActionAdmin},
	ActPrincipalEdit:  {Grant: false, Action: tessera.ActionAdmin},
	ActKeyNew:         {Grant: false, Action: tessera.ActionAdmin},
	ActKeyList:        {Grant: false, Action: tessera.ActionAdmin},
	ActKeyRevoke:      {Grant: false, Action: tessera.ActionAdmin},
	ActNamespaceList:  {Grant: false, Action: tessera.ActionAdmin},
	ActNamespaceSet:   {Grant: false, Action: tessera.ActionAdmin},
	ActNamespaceGet:   {Grant: false, Action: tessera.ActionAdmin},
	ActNamespacePurge: {Grant: false, Action: tessera.ActionAdmin},
	ActStorage:        {Grant: false, Action: tessera.ActionAdmin},
	ActAllowance:      {Grant: false, Action: tessera.ActionAdmin},
	ActMetrics:        {Grant: false, Action: tessera.ActionAdmin},
}

// NeedOf returns what operation op needs of a key. An operation missing
// from the table needs admin: a forgotten entry fails closed.
func NeedOf(op string) Need {
	if n, ok := needs[op]; ok {
		return n
	}
	return Need{Action: tessera.ActionAdmin}
}

// Check is the §4 check of a's scopes against n in namespace ns.
func (n Need) Check(a *auth.Actor, ns string) error {
	if n.Action == tessera.ActionAdmin || n.Grant {
		return a.Check(ns, n.Action)
	}
	return nil
}

// KnownOp reports whether op has an entry of its own in the table of
// needs, rather than the admin NeedOf falls back to.
func KnownOp(op string) bool {
	_, ok := needs[op]
	return ok
}
