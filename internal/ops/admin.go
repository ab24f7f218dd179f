package ops

import (
	"context"
	"net/http"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// auditIn filters one's own audit trail.
type auditIn struct {
	Action  string     `json:"action,omitempty" in:"query"`
	Outcome string     `json:"outcome,omitempty" in:"query"`
	Since   *time.Time `json:"since,omitempty" in:"query"`
	page
}

// maxFilterLen bounds the audit filters.
const maxFilterLen = 64

func (auditIn) Bounds() input.Bounds {
	return input.Bounds{
		"action":  input.Text(maxFilterLen).Doc("only this action, e.g. claim.grant or record.write"),
		"outcome": input.Text(maxFilterLen).Doc("only counters with this outcome, e.g. forbidden or empty"),
		"since":   input.Bound{}.Doc("only what came after this RFC 3339 time, within the last 24 h"),
	}
}

func (a *auditIn) query() core.AuditQuery {
	return core.AuditQuery{Action: a.Action, Outcome: a.Outcome, Since: a.Since, Cursor: a.Cursor, Limit: a.limit()}
}

// adminAuditIn filters everyone's audit trail.
type adminAuditIn struct {
	Namespace string `json:"namespace,omitempty" in:"query"`
	Principal string `json:"principal,omitempty" in:"query"`
	auditIn
}

func (adminAuditIn) Bounds() input.Bounds {
	return input.Bounds{
		"namespace": input.Match(input.NamespaceFormat).Doc("only this namespace"),
		"principal": input.Match(input.IDFormat).Doc("only this principal id"),
	}
}

var auditOps = []*Op{
	op(Op{Name: core.ActMyAudit, Summary: "The caller's own audit events and counters of the last 24 h",
		Description: "Read what your key's principal did in the last 24 h: one event per successful action, newest first, and counters of everything else " +
			"(failures, empty claims, timed-out waits), optionally only one action (e.g. claim.grant) or outcome (e.g. forbidden). Covers every namespace.",
		HTTP: &Route{Method: "GET", Path: "/v1/me/audit", Namespaced: true},
		Tool: &Tool{Name: "my_audit", Title: "Read your audit trail", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *auditIn) (*core.AuditPage, error) {
			return c.core.MyAudit(ctx, c.Actor, in.query())
		}),
	op(Op{Name: core.ActAdminAudit, Summary: "Audit events and counters of the last 24 h",
		HTTP: &Route{Method: "GET", Path: "/v1/admin/audit", Namespaced: true}, Only: adminOnly},
		func(ctx context.Context, c *Call, in *adminAuditIn) (*core.AuditPage, error) {
			q := in.query()
			q.Namespace, q.Principal = in.Namespace, in.Principal
			return c.core.AdminAudit(ctx, c.Actor, q)
		}),
}

// adminOnly says why administration has no tools: the tool list is the
// same for every caller, and a worker's model has no use for minting keys.
const adminOnly = "administration is HTTP's: MCP's tool list is the same for every caller, and a worker's model has no use for keys and principals"

type principalRef struct {
	PrincipalID string `json:"principal_id" in:"path"`
}

func (principalRef) Bounds() input.Bounds {
	return input.Bounds{"principal_id": input.ID("principal").Doc("the principal's id")}
}

type updatePrincipalIn struct {
	principalRef
	core.PrincipalPatch
}

type keyRef struct {
	KeyID string `json:"key_id" in:"path"`
}

func (keyRef) Bounds() input.Bounds {
	return input.Bounds{"key_id": input.ID("key").Doc("the key's id")}
}

// namespaceRef names a namespace an admin acts on (not the one the request
// is made in).
type namespaceRef struct {
	NS string `json:"ns" in:"path"`
}

func (namespaceRef) Bounds() input.Bounds {
	return input.Bounds{"ns": input.Match(input.NamespaceFormat).Doc("the namespace")}
}

type putSettingsIn struct {
	namespaceRef
	core.NamespaceSettingsParams
}

type allowanceIn struct {
	meter.Allowance
}

func (allowanceIn) Bounds() input.Bounds {
	return input.Bounds{
		"rows_written_per_day": input.AtLeast(0).Doc("rows written a UTC day; 0 for no limit"),
		"rows_read_per_day":    input.AtLeast(0).Doc("rows read a UTC day; 0 for no limit"),
	}
}

func adminOp[In, Out any](name, method, path, summary string, run func(ctx context.Context, c *Call, in *In) (Out, error)) *Op {
	status := http.StatusOK
	if method == "POST" {
		status = http.StatusCreated
	}
	return op(Op{Name: name, Summary: summary, Only: adminOnly,
		HTTP: &Route{Method: method, Path: path, Namespaced: true, Status: status}}, run)
}

var adminOps = []*Op{
	adminOp(core.ActPrincipalNew, "POST", "/v1/admin/principals", "Create a principal",
		func(ctx context.Context, c *Call, in *core.PrincipalParams) (*tessera.Principal, error) {
			return c.core.CreatePrincipal(ctx, c.Actor, *in)
		}),
	adminOp(core.ActPrincipalList, "GET", "/v1/admin/principals", "List principals",
		func(ctx context.Context, c *Call, in *page) (*core.PrincipalPage, error) {
			return c.core.ListPrincipals(ctx, c.Actor, in.Cursor, in.limit())
		}),
	adminOp(core.ActPrincipalEdit, "PATCH", "/v1/admin/principals/{principal_id}", "Change a principal",
		func(ctx context.Context, c *Call, in *updatePrincipalIn) (*tessera.Principal, error) {
			return c.core.UpdatePrincipal(ctx, c.Actor, in.PrincipalID, in.PrincipalPatch)
		}),
	adminOp(core.ActKeyNew, "POST", "/v1/admin/keys", "Create a key; its secret is returned once",
		func(ctx context.Context, c *Call, in *core.KeyParams) (*core.NewKey, error) {
			return c.core.CreateKey(ctx, c.Actor, *in)
		}),
	adminOp(core.ActKeyList, "GET", "/v1/admin/keys", "List keys (no secrets)",
		func(ctx context.Context, c *Call, in *page) (*core.KeyPage, error) {
			return c.core.ListKeys(ctx, c.Actor, in.Cursor, in.limit())
		}),
	op(Op{Name: core.ActKeyRevoke, Summary: "Revoke a key", Only: adminOnly,
		HTTP: &Route{Method: "DELETE", Path: "/v1/admin/keys/{key_id}", Namespaced: true, Status: http.StatusNoContent}},
		func(ctx context.Context, c *Call, in *keyRef) (*none, error) {
			return nil, c.core.RevokeKey(ctx, c.Actor, in.KeyID)
		}),
	adminOp(core.ActNamespacePurge, "DELETE", "/v1/admin/namespaces/{ns}", "Purge a namespace's tasks, records, blobs and their bytes (not main)",
		func(ctx context.Context, c *Call, in *namespaceRef) (*core.Purged, error) {
			return c.core.PurgeNamespace(ctx, c.Actor, in.NS)
		}),
	adminOp(core.ActNamespaceList, "GET", "/v1/admin/namespaces", "List namespaces",
		func(ctx context.Context, c *Call, in *page) (*core.NamespacePage, error) {
			return c.core.ListNamespaces(ctx, c.Actor, in.Cursor, in.limit())
		}),
	adminOp(core.ActNamespaceSet, "PUT", "/v1/admin/namespaces/{ns}/settings", "Set a namespace's settings (raw_policy)",
		func(ctx context.Context, c *Call, in *putSettingsIn) (*tessera.NamespaceSettings, error) {
			return c.core.PutNamespaceSettings(ctx, c.Actor, in.NS, in.NamespaceSettingsParams)
		}),
	adminOp(core.ActNamespaceGet, "GET", "/v1/admin/namespaces/{ns}/settings", "A namespace's settings",
		func(ctx context.Context, c *Call, in *namespaceRef) (*tessera.NamespaceSettings, error) {
			return c.core.GetNamespaceSettings(ctx, c.Actor, in.NS)
		}),
	adminOp(core.ActStorage, "GET", "/v1/admin/storage", "Today's metered storage rows",
		func(ctx context.Context, c *Call, _ *none) (*meter.Totals, error) {
			return c.core.StorageToday(ctx, c.Actor)
		}),
	adminOp(core.ActAllowance, "PUT", "/v1/admin/storage/allowance", "Change the daily storage allowance (0 = unlimited)",
		func(ctx context.Context, c *Call, in *allowanceIn) (*meter.Totals, error) {
			return c.core.SetAllowance(ctx, c.Actor, in.Allowance)
		}),
}
