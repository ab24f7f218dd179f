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
	ActTaskList       = "task.list"
	ActTaskGet        = "task.get"
	ActTaskCancel     = "task.cancel"
	ActTaskPause      = "task.pause"
	ActTaskResume     = "task.resume"
	ActTaskRetry      = "task.retry"
	ActTaskNote       = "task.note"
	ActCounts         = "task.counts"
	ActClaim          = "claim.grant"
	ActHeartbeat      = "claim.heartbeat"
	ActSubmit         = "claim.submit"
	ActRelease        = "claim.release"
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
	ActBoard          = "public.board"
	ActActivity       = "public.activity"
	ActStorage        = "admin.storage"
	ActAllowance      = "admin.storage.allowance"
	ActMetrics        = "admin.metrics"
)

// Need is what an operation needs of a key (§4): a grant for the
// namespace and an action scope, or the admin scope, or just a valid key.
type Need struct {
	// Grant asks for a grant for the namespace.
	Grant bool
	// Action is the action scope; "" for none beyond the grant, or admin.
	Action tessera.Action
}

// needs is each operation's Need: the one table both the edge (before any
// namespace work) and the core (right before the operation, and again
// after any wait) check against, so the two cannot disagree.
var needs = map[string]Need{
	ActMe:      {},
	ActMyAudit: {},

	ActTaskEnqueue: {true, tessera.ActionEnqueue},
	ActTaskList:    {true, tessera.ActionRead},
	ActTaskGet:     {true, tessera.ActionRead},
	ActTaskCancel:  {true, tessera.ActionEnqueue},
	ActTaskPause:   {true, tessera.ActionEnqueue},
	ActTaskResume:  {true, tessera.ActionEnqueue},
	ActTaskRetry:   {true, tessera.ActionEnqueue},
	// Notes come from producers (enqueue) or the lease holder (claim):
	// the grant is checked first, the rest by AddNote.
	ActTaskNote: {true, ""},
	ActCounts:   {true, tessera.ActionRead},

	ActClaim:       {true, tessera.ActionClaim},
	ActHeartbeat:   {true, tessera.ActionClaim},
	ActSubmit:      {true, tessera.ActionClaim},
	ActRelease:     {true, tessera.ActionClaim},
	ActClaimEvents: {true, tessera.ActionClaim},

	ActRecordWrite:   {true, tessera.ActionWrite},
	ActRecordRead:    {true, tessera.ActionRead},
	ActRecordHistory: {true, tessera.ActionRead},
	ActRecordList:    {true, tessera.ActionRead},
	ActBucketPut:     {true, tessera.ActionWrite},
	ActBucketList:    {true, tessera.ActionRead},
	ActBlobDeclare:   {true, tessera.ActionWrite},
	ActBlobUpload:    {true, tessera.ActionWrite},
	ActBlobCommit:    {true, tessera.ActionWrite},
	ActBlobRead:      {true, tessera.ActionRead},
	ActBlobMeta:      {true, tessera.ActionRead},

	ActHealth:   {true, tessera.ActionRead},
	ActBoard:    {true, tessera.ActionRead},
	ActActivity: {true, tessera.ActionRead},

	ActAdminAudit:     {false, tessera.ActionAdmin},
	ActPrincipalNew:   {false, tessera.ActionAdmin},
	ActPrincipalList:  {false, tessera.ActionAdmin},
	ActPrincipalEdit:  {false, tessera.ActionAdmin},
	ActKeyNew:         {false, tessera.ActionAdmin},
	ActKeyList:        {false, tessera.ActionAdmin},
	ActKeyRevoke:      {false, tessera.ActionAdmin},
	ActNamespaceList:  {false, tessera.ActionAdmin},
	ActNamespaceSet:   {false, tessera.ActionAdmin},
	ActNamespaceGet:   {false, tessera.ActionAdmin},
	ActNamespacePurge: {false, tessera.ActionAdmin},
	ActStorage:        {false, tessera.ActionAdmin},
	ActAllowance:      {false, tessera.ActionAdmin},
	ActMetrics:        {false, tessera.ActionAdmin},
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
