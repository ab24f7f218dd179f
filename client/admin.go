package client

import (
	"context"
	"net/url"
	"time"
)

// Administration: principals, keys, namespaces and storage. Every method
// here needs an admin key, and calls the main namespace's routes.

// CreatePrincipal creates a principal (POST /v1/admin/principals).
func (c *Client) CreatePrincipal(ctx context.Context, req PrincipalRequest) (*Principal, error) {
	var out Principal
	_, err := c.do(ctx, &request{method: "POST", path: "/admin/principals", body: req}, &out)
	return result(&out, err)
}

// ListPrincipals lists principals (GET /v1/admin/principals).
func (c *Client) ListPrincipals(ctx context.Context, p Page) (*PrincipalPage, error) {
	var out PrincipalPage
	_, err := c.do(ctx, &request{method: "GET", path: "/admin/principals", query: pageQuery(p), safe: true}, &out)
	return result(&out, err)
}

// UpdatePrincipal changes a principal (PATCH /v1/admin/principals/{id}).
func (c *Client) UpdatePrincipal(ctx context.Context, id string, patch PrincipalPatch) (*Principal, error) {
	var out Principal
	_, err := c.do(ctx, &request{method: "PATCH", path: "/admin/principals/" + url.PathEscape(id), body: patch, safe: true}, &out)
	return result(&out, err)
}

// CreateKey creates a key; the answer holds the key itself, shown only
// this once (POST /v1/admin/keys).
func (c *Client) CreateKey(ctx context.Context, req KeyRequest) (*NewKey, error) {
	var out NewKey
	_, err := c.do(ctx, &request{method: "POST", path: "/admin/keys", body: req}, &out)
	return result(&out, err)
}

// ListKeys lists keys without their secrets (GET /v1/admin/keys).
func (c *Client) ListKeys(ctx context.Context, p Page) (*KeyPage, error) {
	var out KeyPage
	_, err := c.do(ctx, &request{method: "GET", path: "/admin/keys", query: pageQuery(p), safe: true}, &out)
	return result(&out, err)
}

// RevokeKey revokes a key (DELETE /v1/admin/keys/{id}).
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	_, err := c.do(ctx, &request{method: "DELETE", path: "/admin/keys/" + url.PathEscape(id), safe: true}, nil)
	return err
}

// ListNamespaces lists the namespaces the store knows, by name
// (GET /v1/admin/namespaces).
func (c *Client) ListNamespaces(ctx context.Context, p Page) (*NamespacePage, error) {
	var out NamespacePage
	_, err := c.do(ctx, &request{method: "GET", path: "/admin/namespaces", query: pageQuery(p), safe: true}, &out)
	return result(&out, err)
}

// PurgeNamespace deletes a namespace's tasks, records, blobs and their
// bytes; main cannot be purged (DELETE /v1/admin/namespaces/{ns}).
// Repeating a purge deletes nothing more, so it is retried like a read.
func (c *Client) PurgeNamespace(ctx context.Context, ns string) (*Purged, error) {
	var out Purged
	_, err := c.do(ctx, &request{method: "DELETE", path: "/admin/namespaces/" + url.PathEscape(ns), safe: true}, &out)
	return result(&out, err)
}

// NamespaceSettings returns a namespace's settings
// (GET /v1/admin/namespaces/{ns}/settings).
func (c *Client) NamespaceSettings(ctx context.Context, ns string) (*NamespaceSettings, error) {
	var out NamespaceSettings
	_, err := c.do(ctx, &request{method: "GET", path: "/admin/namespaces/" + url.PathEscape(ns) + "/settings", safe: true}, &out)
	return result(&out, err)
}

// SetNamespaceSettings sets a namespace's raw-blob policy (private or
// namespace) (PUT /v1/admin/namespaces/{ns}/settings).
func (c *Client) SetNamespaceSettings(ctx context.Context, ns, rawPolicy string) (*NamespaceSettings, error) {
	var out NamespaceSettings
	_, err := c.do(ctx, &request{method: "PUT", path: "/admin/namespaces/" + url.PathEscape(ns) + "/settings",
		body: map[string]string{"raw_policy": rawPolicy}, safe: true}, &out)
	return result(&out, err)
}

// Storage returns today's metered storage rows (GET /v1/admin/storage).
func (c *Client) Storage(ctx context.Context) (*StorageTotals, error) {
	var out StorageTotals
	_, err := c.do(ctx, &request{method: "GET", path: "/admin/storage", safe: true}, &out)
	return result(&out, err)
}

// SetAllowance replaces the daily storage allowance for the rest of the
// UTC day (PUT /v1/admin/storage/allowance).
func (c *Client) SetAllowance(ctx context.Context, a Allowance) (*StorageTotals, error) {
	var out StorageTotals
	_, err := c.do(ctx, &request{method: "PUT", path: "/admin/storage/allowance", body: a, safe: true}, &out)
	return result(&out, err)
}

// MyAudit returns the caller's own audit events and counters of the last
// 24 h (GET /v1/me/audit); f.Namespace and f.Principal must be empty.
func (c *Client) MyAudit(ctx context.Context, f AuditFilter) (*AuditPage, error) {
	return c.audit(ctx, "/me/audit", f)
}

// AdminAudit returns everyone's audit events and counters of the last
// 24 h (GET /v1/admin/audit).
func (c *Client) AdminAudit(ctx context.Context, f AuditFilter) (*AuditPage, error) {
	return c.audit(ctx, "/admin/audit", f)
}

func (c *Client) audit(ctx context.Context, path string, f AuditFilter) (*AuditPage, error) {
	q := url.Values{}
	set(q, "namespace", f.Namespace)
	set(q, "principal", f.Principal)
	set(q, "action", f.Action)
	set(q, "outcome", f.Outcome)
	set(q, "cursor", f.Cursor)
	setInt(q, "limit", f.Limit)
	if f.Since != nil {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	var out AuditPage
	_, err := c.do(ctx, &request{method: "GET", path: path, query: q, safe: true}, &out)
	return result(&out, err)
}
