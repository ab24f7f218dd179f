package discovery

import (
	"bytes"
	"fmt"
	"html/template"
	"sort"
	"strings"
)

const tagline = "Work coordination for AI agents and other workers: namespaced task queues with leases, heartbeats, results and an audit trail."

func landingSummary(cfg Config) map[string]any {
	return map[string]any{
		"name":        "Tessera",
		"description": tagline,
		"version":     cfg.Version,
		"api_base":    cfg.PublicURL + "/v1",
		"openapi_url": cfg.PublicURL + "/v1/openapi.json",
		"connect_url": cfg.PublicURL + "/connect.json",
		"llms_txt":    cfg.PublicURL + "/llms.txt",
		"agent_card":  cfg.PublicURL + "/.well-known/agent-card.json",
		"mcp_url":     cfg.PublicURL + "/mcp",
		"board_url":   cfg.PublicURL + "/board",
		"console_url": cfg.PublicURL + "/console",
		"events_url":  cfg.PublicURL + "/v1/events",
		"try_it":      "POST " + cfg.PublicURL + "/v1/sessions (no key) for a demo key and practice tasks",
	}
}

// sessionJSON describes the anonymous session endpoint and its limits.
func sessionJSON(cfg Config) map[string]any {
	return map[string]any{
		"available":               true,
		"endpoint":                cfg.PublicURL + "/v1/sessions",
		"method":                  "POST",
		"mcp_tool":                "start_session",
		"key_needed":              false,
		"lifetime_hours":          cfg.Sessions.LifetimeHours,
		"requests_per_session":    cfg.Sessions.Requests,
		"request_body_bytes":      cfg.Sessions.BodyBytes,
		"sessions_per_address_hr": cfg.Sessions.PerAddressPerHour,
		"sessions_per_hour":       cfg.Sessions.PerHour,
		"namespace":               "demo-<session id>, with practice tasks on queue \"practice\"",
	}
}

func connectJSON(cfg Config) map[string]any {
	return map[string]any{
		"name":                "Tessera",
		"version":             cfg.Version,
		"api_base":            cfg.PublicURL + "/v1",
		"namespaced_api_base": cfg.PublicURL + "/ns/{namespace}/v1",
		"openapi_url":         cfg.PublicURL + "/v1/openapi.json",
		"mcp_url":             cfg.PublicURL + "/mcp",
		"mcp":                 mcpSummary(cfg),
		"auth": map[string]any{
			"scheme":      "bearer",
			"header":      "Authorization: Bearer tsk_<id>_<secret>",
			"key_format":  "tsk_<id>_<secret>",
			"obtain_from": "an operator: POST /v1/admin/keys with an admin key, or `tessera admin create-key`",
		},
		"anonymous_session": sessionJSON(cfg),
		"limits": map[string]any{
			"request_body_bytes":     cfg.MaxBodyBytes,
			"blob_upload_bytes":      cfg.MaxBlobBytes,
			"claims_per_second":      cfg.ClaimRate,
			"claim_burst":            cfg.ClaimBurst,
			"claims_in_flight":       cfg.ClaimConcurrency,
			"claim_wait_seconds_max": cfg.Limits.ClaimWaitMax,
			"lease_seconds":          map[string]int64{"min": cfg.Limits.LeaseMin, "default": cfg.Limits.LeaseDefault, "max": cfg.Limits.LeaseMax},
		},
	}
}

func agentCard(cfg Config) map[string]any {
	skill := func(id, name, desc string, tags ...string) map[string]any {
		return map[string]any{"id": id, "name": name, "description": desc, "tags": tags}
	}
	return map[string]any{
		"name":        "Tessera",
		"description": tagline,
		"version":     cfg.Version,
		"supportedInterfaces": []any{
			map[string]any{"url": cfg.PublicURL + "/v1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
		},
		"documentationUrl": cfg.PublicURL + "/connect",
		"capabilities": map[string]any{"streaming": false, "pushNotifications": false, "extendedAgentCard": false,
			// A2A has no MCP binding; an extension names the MCP endpoint.
			"extensions": []any{map[string]any{
				"uri":         "https://modelcontextprotocol.io/specification/" + cfg.MCP.Versions[0],
				"description": "The same operations as MCP tools, at " + cfg.PublicURL + "/mcp (Streamable HTTP, stateless; bearer key)",
				"required":    false,
				"params":      map[string]any{"url": cfg.PublicURL + "/mcp", "protocolVersions": cfg.MCP.Versions, "clientConfig": mcpClientConfig(cfg)},
			}}},
		"securitySchemes":    map[string]any{"bearer": map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer", "description": "tsk_<id>_<secret>"}}},
		"defaultInputModes":  []string{"application/json"},
		"defaultOutputModes": []string{"application/json"},
		"skills": []any{
			skill("enqueue", "Enqueue tasks", "Put a task with a brief and a JSON payload on a namespaced queue, optionally scheduled, prioritized and idempotent.", "queue", "tasks", "producer"),
			skill("claim", "Claim work", fmt.Sprintf("Claim the next ready task with a time-limited lease, long-polling up to %d s when the queue is empty.", cfg.Limits.ClaimWaitMax), "queue", "lease", "worker"),
			skill("heartbeat", "Keep a lease alive", "Extend a lease, report progress, and learn of cancellation.", "lease", "worker"),
			skill("submit", "Submit results", "End a run as succeeded (with a JSON result) or failed (retried with backoff, dead-lettered when attempts run out).", "results", "worker"),
			skill("inspect", "Inspect tasks", "List and count tasks by queue and state, and read a task with its runs.", "observability"),
			skill("mcp", "MCP tools", "Every worker operation — claim, heartbeat, records, blobs, submit, audit — as MCP tools at "+cfg.PublicURL+"/mcp.", "mcp", "tools", "worker"),
		},
	}
}

// apiReference renders the route list for llms.txt and the connect page.
func apiReference(routes []Route) string {
	var b strings.Builder
	sorted := append([]Route(nil), routes...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, r := range sorted {
		auth := r.Auth
		switch auth {
		case "key":
			auth = "any valid key"
		case "admin":
			auth = "admin"
		case "public":
			auth = "no key (main namespace)"
		default:
			auth = "scope " + auth
		}
		fmt.Fprintf(&b, "- `%s %s` — %s (%s)\n", r.Method, r.Path, r.Summary, auth)
	}
	return b.String()
}

func llmsTxt(cfg Config, routes []Route, full bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Tessera\n\n> %s\n\n", tagline)
	b.WriteString(`Tessera speaks HTTP/JSON, and MCP at /mcp. Every request carries ` + "`Authorization: Bearer tsk_<id>_<secret>`" + `.
Routes under /v1 act on the main namespace; the same routes under /ns/{namespace}/v1 act on another.
Workers claim a task (POST /v1/claims), heartbeat before the lease expires, and submit an outcome.
An empty claim answers 204 with Retry-After; prefer "wait_seconds" (≤ ` + fmt.Sprint(cfg.Limits.ClaimWaitMax) + `) to long-poll.
Errors: {"error":{"code","message","details"}} with codes invalid_request, unauthorized, forbidden,
not_found, lease_lost, version_conflict, invalid_state, idempotency_conflict, payload_too_large,
rate_limited, storage_quota_exhausted, unavailable, internal.

`)
	fmt.Fprintf(&b, "No key yet? POST %s/v1/sessions (no key; MCP: start_session) answers a demo key for a namespace of your own with practice tasks (%d h, %d requests, %d KiB a request).\n\n",
		cfg.PublicURL, cfg.Sessions.LifetimeHours, cfg.Sessions.Requests, cfg.Sessions.BodyBytes/1024)
	b.WriteString(mcpText(cfg))
	fmt.Fprintf(&b, "## Docs\n\n- [OpenAPI 3.1 description](%s/v1/openapi.json): every route with request and response schemas\n", cfg.PublicURL)
	fmt.Fprintf(&b, "- [Connect guide](%s/connect): keys, curl walk-through\n", cfg.PublicURL)
	fmt.Fprintf(&b, "- [Connect (machine form)](%s/connect.json): base URLs, auth scheme, limits\n", cfg.PublicURL)
	fmt.Fprintf(&b, "- [Full reference for LLMs](%s/llms-full.txt): this file with the API reference inlined\n\n", cfg.PublicURL)
	fmt.Fprintf(&b, "## Optional\n\n- [A2A agent card](%s/.well-known/agent-card.json)\n", cfg.PublicURL)
	if full {
		b.WriteString("\n## API reference\n\n")
		b.WriteString(apiReference(routes))
		b.WriteString(`
## Worker loop

1. POST /v1/claims {"queue":"default","lease_seconds":` + fmt.Sprint(cfg.Limits.LeaseDefault) + `,"wait_seconds":` + fmt.Sprint(cfg.Limits.ClaimWaitMax) + `}
   → 200 {"lease":{"task_id","run_id","token","expires_at"},"task":{...}} or 204 (Retry-After: seconds).
2. While working: POST /v1/claims/{task}/heartbeat {"lease_token":"...","progress":{...}}
   → {"expires_at","cancel_requested"}; stop if cancel_requested is true.
3. POST /v1/claims/{task}/submit {"lease_token":"...","outcome":"succeeded","result":{...}}
   with an Idempotency-Key header so a retry after a network error is safe.
   A 409 lease_lost means the lease lapsed or the task was canceled: drop the work.

## MCP tools

`)
		b.WriteString(mcpToolReference(cfg))
	}
	return []byte(b.String())
}

const robots = "User-agent: *\nAllow: /\nDisallow: /v1/\nDisallow: /ns/\n"

const favicon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f2a44"/><rect x="6" y="6" width="9" height="9" fill="#f2b134"/><rect x="17" y="6" width="9" height="9" fill="#4fb3bf"/><rect x="6" y="17" width="9" height="9" fill="#4fb3bf"/><rect x="17" y="17" width="9" height="9" fill="#e8e8e8"/></svg>`

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title><link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>
body{font:16px/1.55 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1f2a44;background:#fafaf7}
main{max-width:46rem;margin:0 auto;padding:2.5rem 1.25rem 4rem}
h1{font-size:2rem;margin:.2em 0}h2{margin-top:2.2em;font-size:1.25rem}
code,pre{font:14px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace;background:#eef0f4;border-radius:4px}
code{padding:.1em .3em}pre{padding:.9rem 1rem;overflow-x:auto}
a{color:#2d6f7a}.lede{font-size:1.15rem;color:#3b4660}nav a{margin-right:1rem}
table{border-collapse:collapse}td,th{padding:.3rem .6rem;border-bottom:1px solid #dde;text-align:left;vertical-align:top}
</style></head><body><main>
<nav><a href="/">Tessera</a><a href="/connect">Connect</a><a href="/board">Board</a><a href="/console">Console</a><a href="/v1/openapi.json">OpenAPI</a><a href="/llms.txt">llms.txt</a></nav>
{{.Body}}
<p style="margin-top:3rem;color:#778">Tessera {{.Version}}</p>
</main></body></html>
`))

func page(cfg Config, title string, body template.HTML) []byte {
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, map[string]any{"Title": title, "Body": body, "Version": cfg.Version}); err != nil {
		panic(err) // the template and its data are fixed at build time
	}
	return b.Bytes()
}

func landingHTML(cfg Config) []byte {
	u := template.HTMLEscapeString(cfg.PublicURL)
	return page(cfg, "Tessera — work coordination for agents", template.HTML(`
<h1>Tessera</h1>
<p class="lede">`+tagline+`</p>
<p>Producers put tasks on queues. Workers — LLM agents, scripts, services — claim one task at a time
with a <em>lease</em>, keep it alive with heartbeats, and submit a result. If a worker vanishes, its lease
lapses and the task goes back to the queue with exponential backoff; when its attempts run out it is
dead-lettered, where a person can look at it and retry it.</p>
<h2>What you get</h2>
<ul>
<li><strong>Namespaces</strong> — every route under <code>/v1</code> also lives under <code>/ns/{namespace}/v1</code>, each an isolated tenant.</li>
<li><strong>Leases that cannot double up</strong> — a task never has two live leases, however many workers race for it.</li>
<li><strong>Long-poll claims</strong> — <code>wait_seconds</code> up to `+fmt.Sprint(cfg.Limits.ClaimWaitMax)+` wakes the moment work arrives, instead of polling.</li>
<li><strong>Safe retries</strong> — <code>Idempotency-Key</code> on enqueue and submit.</li>
<li><strong>Scoped keys</strong> — <code>read</code>, <code>enqueue</code>, <code>claim</code>, <code>write</code>, per namespace.</li>
</ul>
<h2>Watch it</h2>
<p><a href="/board">The board</a> shows the main namespace's public tasks and records as they change, with no key.
<a href="/console">The console</a> is for operators: paste a key and see every queue and task it may see —
depth, leases, throughput, each task's runs, errors and trail — retry, cancel, pause and purge, all live.
Programs follow the same changes as Server-Sent Events at <code>`+u+`/v1/events</code>.</p>
<h2>Start here</h2>
<p>Try it with no key: <code>curl -s -X POST `+u+`/v1/sessions</code> gives you a demo key and practice tasks.
Read <a href="/connect">the connect guide</a> for a curl walk-through, or hand your agent
<a href="/llms.txt">llms.txt</a> and <a href="/v1/openapi.json">the OpenAPI description</a>.
The API base is <code>`+u+`/v1</code>.</p>
`))
}

func connectHTML(cfg Config) []byte {
	u := template.HTMLEscapeString(cfg.PublicURL)
	return page(cfg, "Connect to Tessera", template.HTML(`
<h1>Connect to Tessera</h1>
<p class="lede">Everything you need to enqueue work and run a worker, with nothing but curl.</p>
<h2>1. Get a key</h2>
<p>Keys look like <code>tsk_&lt;id&gt;_&lt;secret&gt;</code> and go in every request as
<code>Authorization: Bearer …</code>. An operator creates them: the first start of a server prints an
admin key once, and an admin makes narrower keys for producers and workers:</p>
<pre>curl -s -H "Authorization: Bearer $ADMIN" `+u+`/v1/admin/principals -d '{"kind":"agent","display_name":"worker-1"}'
curl -s -H "Authorization: Bearer $ADMIN" `+u+`/v1/admin/keys \
  -d '{"principal_id":"&lt;id from above&gt;","scopes":["namespace:main","claim","read"]}'
# → {"id":…,"key":"tsk_…"}: the secret is shown this once</pre>
<h2>2. Enqueue a task</h2>
<pre>K="Authorization: Bearer $KEY"
curl -s -H "$K" `+u+`/v1/tasks -H 'Idempotency-Key: report-17' \
  -d '{"title":"Summarize report 17","brief":"Three bullet points.","payload":{"doc":"r-17"}}'</pre>
<h2>3. Work it</h2>
<pre># claim: 200 with a lease, or 204 + Retry-After when nothing is ready (wait_seconds long-polls)
curl -s -H "$K" `+u+`/v1/claims -d '{"queue":"default","lease_seconds":120,"wait_seconds":`+fmt.Sprint(cfg.Limits.ClaimWaitMax)+`}'

# heartbeat before expires_at; it tells you if the task was canceled
curl -s -H "$K" `+u+`/v1/claims/$TASK/heartbeat -d '{"lease_token":"'$TOKEN'","progress":{"pct":40}}'

# submit the outcome: succeeded, or failed (retried with backoff until attempts run out)
curl -s -H "$K" -H 'Idempotency-Key: done-17' `+u+`/v1/claims/$TASK/submit \
  -d '{"lease_token":"'$TOKEN'","outcome":"succeeded","result":{"summary":"…"}}'</pre>
<h2>4. Watch it</h2>
<pre>curl -s -H "$K" `+u+`/v1/counts
curl -s -H "$K" "`+u+`/v1/tasks?state=dead"</pre>
<h2>Namespaces</h2>
<p>Prefix any route with <code>/ns/{namespace}</code> — for example <code>`+u+`/ns/build-farm/v1/claims</code>.
A key reaches a namespace only with the grant <code>namespace:&lt;name&gt;</code> (or <code>namespace:*</code>).</p>
<h2>MCP clients</h2>
<p>Tessera is an MCP tool server at <code>`+u+`/mcp</code> (Streamable HTTP, stateless, revisions
`+template.HTMLEscapeString(strings.Join(cfg.MCP.Versions, ", "))+`). Paste this into your client's MCP configuration, with your key:</p>
<pre>`+template.HTMLEscapeString(mcpClientConfigText(cfg))+`</pre>
<p>An agent then works with the tools <code>claim_task</code> → <code>heartbeat</code> → <code>write_record</code> →
<code>submit_task</code>; <code>explain_access_modes</code> needs no key and explains keys and scopes.</p>
<h2>Try it: an anonymous session</h2>
<p>No key yet? One call gives you a key, a namespace of your own and practice tasks whose briefs walk
you through claim → heartbeat → record → blob → submit:</p>
<pre>curl -s -X POST `+u+`/v1/sessions</pre>
<p>(MCP: call <code>start_session</code>, no key needed.) A session lasts `+fmt.Sprint(cfg.Sessions.LifetimeHours)+` h and
makes at most `+fmt.Sprint(cfg.Sessions.Requests)+` requests of at most `+fmt.Sprint(cfg.Sessions.BodyBytes/1024)+` KiB;
an address may start `+fmt.Sprint(cfg.Sessions.PerAddressPerHour)+` an hour, everyone together
`+fmt.Sprint(cfg.Sessions.PerHour)+` an hour.</p>
<h2>Machine-readable</h2>
<table>
<tr><td><a href="/connect.json">/connect.json</a></td><td>base URLs, auth scheme, limits</td></tr>
<tr><td><a href="/v1/openapi.json">/v1/openapi.json</a></td><td>OpenAPI 3.1 description of every route</td></tr>
<tr><td><a href="/llms.txt">/llms.txt</a>, <a href="/llms-full.txt">/llms-full.txt</a></td><td>for language models</td></tr>
<tr><td><a href="/.well-known/agent-card.json">agent-card.json</a></td><td>A2A agent card</td></tr>
</table>
`))
}
