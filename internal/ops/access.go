package ops

import (
	"cmp"
	"context"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Instructions is what server/discover and initialize tell a model about
// using Tessera.
const Instructions = `Tessera coordinates work: producers put tasks on namespaced queues, workers claim them with a time-limited lease and submit a result.
To work as a worker: call claim_task (queue, lease_seconds; wait_seconds up to 20 waits for work). If the answer has lease: null, wait retry_after seconds and claim again.
Otherwise read task.brief and task.payload, and keep lease.token: it is your lease_token. While you work, call heartbeat with task_id and lease_token before lease.expires_at; stop if it answers cancel_requested.
Leave artifacts with write_record (bucket, key, value, lease_token) and upload_blob, then call submit_task with outcome "succeeded" and a result (or "failed" and an error), with an idempotency_key so a retry is safe.
A lease_lost error means the lease lapsed or the task was canceled: drop the work and claim again. Every tool takes an optional namespace (default "main"); your key needs a grant for it (explain_access_modes tells how keys, scopes and sessions work).
Errors come back as results with isError: true and structuredContent {status, code, message, field?, retry_after?, reset_at?}: the HTTP status and error code of Tessera's API.`

var accessOps = []*Op{
	op(Op{Name: core.ActAccessModes, Summary: "How to get access",
		Description: "Explain how to reach Tessera: API keys and their scopes (which tools each scope allows), namespaces, anonymous demo sessions, and what needs no key. " +
			"Needs no key and touches no storage: call it first when a call answers unauthorized or forbidden.",
		Tool: &Tool{Name: "explain_access_modes", Title: "How to get access", ReadOnly: true},
		Only: "MCP's form of GET /connect.json, the discovery document HTTP clients read"},
		explainAccessModes),
	op(Op{Name: core.ActSessionStart, Summary: "Start an anonymous demo session: a key for a namespace of practice tasks",
		Description: "Start an anonymous demo session, with no key: it answers a key (send it as your bearer token from then on), " +
			"a namespace of your own with practice tasks that walk claim → heartbeat → record → blob → submit, its expiry (24 h), " +
			"its limits (requests left, 64 KiB per request) and the next call to make (claim_task on queue \"practice\" in that namespace). " +
			"A client configured with a fixed key keeps it: start_session is for a client without one.",
		HTTP: &Route{Method: "POST", Path: "/v1/sessions", Status: 201},
		Tool: &Tool{Name: "start_session", Title: "Start a demo session"}},
		func(ctx context.Context, c *Call, _ *none) (*core.Session, error) { return c.core.StartSession(ctx) }),
	op(Op{Name: core.ActMe, Summary: "The caller's principal and key",
		Description: "Show the principal behind your key (id, kind, account, display name), the key's id, scopes and expiry.",
		HTTP:        &Route{Method: "GET", Path: "/v1/me", Namespaced: true},
		Tool:        &Tool{Name: "whoami", Title: "Who am I", ReadOnly: true}},
		func(ctx context.Context, c *Call, _ *none) (*core.Me, error) { return c.core.WhoAmI(ctx, c.Actor) }),
}

// accessModesIn asks about one namespace.
type accessModesIn struct {
	Namespace string `json:"namespace,omitempty"`
}

func (accessModesIn) Bounds() input.Bounds {
	return input.Bounds{"namespace": input.Match(input.NamespaceFormat).Doc(`the namespace to explain access to (default "main")`)}
}

// accessModes answers explain_access_modes.
type accessModes struct {
	MCPURL    string       `json:"mcp_url"`
	APIBase   string       `json:"api_base"`
	Namespace string       `json:"namespace" doc:"the namespace asked about; tools act on it when given this namespace"`
	Modes     []accessMode `json:"modes"`
	Scopes    []scopeDoc   `json:"scopes"`
}

type accessMode struct {
	Mode        string `json:"mode"`
	Available   bool   `json:"available"`
	Description string `json:"description"`
}

type scopeDoc struct {
	Scope       string   `json:"scope"`
	Description string   `json:"description"`
	Tools       []string `json:"tools"`
}

// explainAccessModes answers from the table alone: which tools each scope
// allows is what each tool's operation needs.
func explainAccessModes(_ context.Context, c *Call, in *accessModesIn) (*accessModes, error) {
	ns := cmp.Or(in.Namespace, tessera.MainNamespace)
	byAction := map[tessera.Action][]string{}
	var anyKeyTools []string
	for _, o := range Tools() {
		switch need := o.Need(); {
		case need.Keyless:
		case need.Grant:
			byAction[need.Action] = append(byAction[need.Action], o.Tool.Name)
		default:
			anyKeyTools = append(anyKeyTools, o.Tool.Name)
		}
	}
	grant := "namespace:" + ns
	return &accessModes{
		MCPURL: c.PublicURL + "/mcp", APIBase: c.PublicURL + "/v1", Namespace: ns,
		Modes: []accessMode{
			{Mode: "api_key", Available: true, Description: "A key tsk_<id>_<secret> from the operator (POST /v1/admin/keys, or `tessera admin create-key`), " +
				"sent on every request as the header Authorization: Bearer <key>. Its scopes say what it may do where."},
			{Mode: "anonymous_session", Available: true, Description: "A demo key for a namespace of its own with practice tasks, minted by start_session or POST /v1/sessions without a key: " +
				"it lasts 24 h, makes at most a few thousand requests of at most 64 KiB, and reaches only its own namespace (pass it as namespace)."},
			{Mode: "public", Available: true, Description: "No key: these MCP tools (explain_access_modes, start_session, tools/list) and, over HTTP, the main namespace's /board, /v1/health and /v1/public/activity."},
		},
		Scopes: []scopeDoc{
			{Scope: grant, Description: "reach namespace " + ns + " at all (namespace:* reaches every one); needed beside an action scope", Tools: nil},
			{Scope: string(tessera.ActionRead), Description: "read tasks, counts, records and blobs", Tools: byAction[tessera.ActionRead]},
			{Scope: string(tessera.ActionEnqueue), Description: "put tasks on queues, cancel, pause, resume and retry them", Tools: byAction[tessera.ActionEnqueue]},
			{Scope: string(tessera.ActionClaim), Description: "work tasks: claim, heartbeat, submit, release, claim events", Tools: byAction[tessera.ActionClaim]},
			{Scope: string(tessera.ActionWrite), Description: "write records, buckets and blobs", Tools: byAction[tessera.ActionWrite]},
			{Scope: "any valid key", Description: "your own identity and audit trail, in any namespace", Tools: anyKeyTools},
			{Scope: string(tessera.ActionAdmin), Description: "everything in every namespace, and administration (over HTTP)", Tools: nil},
		},
	}, nil
}
