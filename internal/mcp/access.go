package mcp

import (
	"context"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Instructions is what server/discover and initialize tell a model about
// using Tessera.
const Instructions = `Tessera coordinates work: producers put tasks on namespaced queues, workers claim them with a time-limited lease and submit a result.
To work as a worker: call claim_task (queue, lease_seconds; wait_seconds up to 20 waits for work). If the answer has lease: null, wait retry_after seconds and claim again.
Otherwise read task.brief and task.payload, and keep lease.token: it is your lease_token. While you work, call heartbeat with task_id and lease_token before lease.expires_at; stop if it answers cancel_requested.
Leave artifacts with write_record (bucket, key, value, lease_token) and upload_blob, then call submit_task with outcome "succeeded" and a result (or "failed" and an error), with an idempotency_key so a retry is safe.
A lease_lost error means the lease lapsed or the task was canceled: drop the work and claim again. Every tool takes an optional namespace (default "main"); your key needs a grant for it (explain_access_modes tells how keys, scopes and sessions work).
Errors come back as results with isError: true and structuredContent {status, code, message, retry_after?, reset_at?}: the HTTP status and error code of Tessera's API.`

func (e *Endpoint) accessTools() []*tool {
	return []*tool{
		toolFunc(tool{name: "explain_access_modes", title: "How to get access", keyless: true, readOnly: true,
			description: "Explain how to reach Tessera: API keys and their scopes (which tools each scope allows), namespaces, anonymous demo sessions, and what needs no key. " +
				"Needs no key and touches no storage: call it first when a call answers unauthorized or forbidden.",
			out: accessModes{}}, e.explainAccessModes),
		toolFunc(tool{name: "start_session", title: "Start a demo session", keyless: true, op: core.ActSessionStart,
			description: "Start an anonymous demo session, with no key: it answers a key (send it as your bearer token from then on), " +
				"a namespace of your own with practice tasks that walk claim → heartbeat → record → blob → submit, its expiry (24 h), " +
				"its limits (requests left, 64 KiB per request) and the next call to make (claim_task on queue \"practice\" in that namespace). namespace is ignored.",
			out: core.Session{}}, e.startSession),
		toolFunc(tool{name: "whoami", title: "Who am I", op: core.ActMe, readOnly: true,
			description: "Show the principal behind your key (id, kind, account, display name), the key's id, scopes and expiry. namespace is ignored.",
			out:         core.Me{}}, e.whoami),
	}
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

func (e *Endpoint) explainAccessModes(_ context.Context, c *toolCall, _ *nsArg) (any, error) {
	byAction := map[tessera.Action][]string{}
	var anyKeyTools []string
	for _, t := range e.tools {
		switch need := core.NeedOf(t.op); {
		case t.keyless:
		case need.Grant:
			byAction[need.Action] = append(byAction[need.Action], t.name)
		default:
			anyKeyTools = append(anyKeyTools, t.name)
		}
	}
	grant := "namespace:" + c.ns
	return accessModes{
		MCPURL: e.cfg.PublicURL + "/mcp", APIBase: e.cfg.PublicURL + "/v1", Namespace: c.ns,
		Modes: []accessMode{
			{Mode: "api_key", Available: true, Description: "A key tsk_<id>_<secret> from the operator (POST /v1/admin/keys, or `tessera admin create-key`), " +
				"sent on every request as the header Authorization: Bearer <key>. Its scopes say what it may do where."},
			{Mode: "anonymous_session", Available: true, Description: "A demo key for a namespace of its own with practice tasks, minted by start_session or POST /v1/sessions without a key: " +
				"it lasts 24 h, makes at most a few thousand requests of at most 64 KiB, and reaches only its own namespace."},
			{Mode: "public", Available: true, Description: "No key: these MCP tools (explain_access_modes, start_session, tools/list) and, over HTTP, the main namespace's /board, /v1/health and /v1/public/activity."},
		},
		Scopes: []scopeDoc{
			{Scope: grant, Description: "reach namespace " + c.ns + " at all (namespace:* reaches every one); needed beside an action scope", Tools: nil},
			{Scope: string(tessera.ActionRead), Description: "read tasks, counts, records and blobs", Tools: byAction[tessera.ActionRead]},
			{Scope: string(tessera.ActionEnqueue), Description: "put tasks on queues", Tools: byAction[tessera.ActionEnqueue]},
			{Scope: string(tessera.ActionClaim), Description: "work tasks: claim, heartbeat, submit, release, claim events", Tools: byAction[tessera.ActionClaim]},
			{Scope: string(tessera.ActionWrite), Description: "write records and blobs", Tools: byAction[tessera.ActionWrite]},
			{Scope: "any valid key", Description: "your own identity and audit trail, in any namespace", Tools: anyKeyTools},
			{Scope: string(tessera.ActionAdmin), Description: "everything in every namespace, and administration (over HTTP)", Tools: nil},
		},
	}, nil
}

// startSession mints an anonymous demo session (SPEC §12) for the
// caller's address, as POST /v1/sessions does.
func (e *Endpoint) startSession(ctx context.Context, _ *toolCall, _ *nsArg) (any, error) {
	return e.core.StartSession(ctx)
}

func (e *Endpoint) whoami(ctx context.Context, c *toolCall, _ *nsArg) (any, error) {
	return e.core.WhoAmI(ctx, c.actor)
}
