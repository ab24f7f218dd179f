package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The board page: rendered here from the board snapshot, no script, no
// build step, nothing fetched from elsewhere. It reloads itself every
// boardRefresh seconds, which is about what the snapshot lives.
const boardRefresh = 10

// boardStates is the order the page shows tasks in: work in hand first,
// then waiting, then finished.
var boardStates = []string{tessera.StateLeased, tessera.StateReady, tessera.StateScheduled, tessera.StateWaiting, tessera.StateGated, tessera.StatePaused,
	tessera.StateSucceeded, tessera.StateDead, tessera.StateCanceled}

type boardPage struct {
	*core.Board
	Refresh int
	Prefix  string // "/ns/{ns}" or ""
	// Live marks main's board, which follows the public event stream
	// (the script needs no key); another namespace's reloads itself.
	Live   bool
	Groups []boardGroup
	Shown  int
	Total  int
}

type boardGroup struct {
	State string
	Tasks []core.BoardTask
}

func (s *Server) writeBoardPage(w http.ResponseWriter, ns string, b *core.Board) error {
	p := boardPage{Board: b, Refresh: boardRefresh, Prefix: ops.NamespacePrefix(ns), Live: ns == tessera.MainNamespace}
	for _, st := range boardStates {
		if ts := b.Tasks[st]; len(ts) > 0 {
			p.Groups = append(p.Groups, boardGroup{State: st, Tasks: ts})
			p.Shown += len(ts)
		}
	}
	for _, n := range b.Health.Totals.Counts {
		p.Total += n
	}
	var buf bytes.Buffer
	if err := boardTmpl.Execute(&buf, p); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	// Only the board's own script runs here (it follows the public
	// event stream), and nothing loads from elsewhere.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err := buf.WriteTo(w)
	return err
}

var boardFuncs = template.FuncMap{
	// pretty is a JSON value as text for reading (text.go).
	"pretty": func(v json.RawMessage) template.HTML { return shown(jsonText(v)) },
	// shown is free text with its bidi controls shown, not obeyed.
	"shown": shown,
	// ago says how long before the snapshot t was, or how long after.
	"ago": func(t, now time.Time) string {
		d := now.Sub(t)
		if d < 0 {
			return "in " + roughly(-d)
		}
		if d < time.Second {
			return "just now"
		}
		return roughly(d) + " ago"
	},
	"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"short": func(id string) string {
		if len(id) > 10 {
			return "…" + id[len(id)-8:]
		}
		return id
	},
	"seconds": func(s *float64) string {
		if s == nil {
			return "—"
		}
		return roughly(time.Duration(*s * float64(time.Second)))
	},
	"count":  func(m map[string]int, st string) int { return m[st] },
	"states": func() []string { return core.StoredStates },
	"bytes": func(n int) string {
		if n < 1024 {
			return fmt.Sprintf("%d bytes", n)
		}
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	},
}

// roughly writes a duration the way a person says it.
func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

var boardTmpl = template.Must(template.New("board").Funcs(boardFuncs).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{- if .Live}}
<noscript><meta http-equiv="refresh" content="{{.Refresh}}"></noscript>
<script src="/console/board.js" defer></script>
{{- else}}
<meta http-equiv="refresh" content="{{.Refresh}}">
{{- end}}
<title>Board · {{.Namespace}} · Tessera</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>
:root{--ink:#1f2a44;--soft:#5b6680;--line:#e3e5ec;--bg:#fafaf7;--card:#fff;--code:#f1f3f7;
--leased:#2d6f7a;--ready:#3a7d44;--scheduled:#7a6a2d;--paused:#8a8f99;--succeeded:#2f5fa7;--dead:#b5473a;--canceled:#a08a7a}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:var(--ink);background:var(--bg)}
main{max-width:68rem;margin:0 auto;padding:1.6rem 1.25rem 3rem}
header{display:flex;flex-wrap:wrap;align-items:baseline;gap:.4rem 1rem;border-bottom:1px solid var(--line);padding-bottom:.8rem}
header h1{font-size:1.55rem;margin:0}
header .ns{font:600 .85rem ui-monospace,Menlo,monospace;background:var(--ink);color:#fff;border-radius:4px;padding:.15rem .45rem}
header .asof{margin-left:auto;color:var(--soft);font-size:.9rem}
h2{font-size:1.1rem;margin:2rem 0 .7rem}
h3{font-size:1rem;margin:1.3rem 0 .5rem}
h2 .n,h3 .n{color:var(--soft);font-weight:400}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(7rem,1fr));gap:.6rem;margin-top:1.2rem}
.tile{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.6rem .8rem}
.tile b{display:block;font-size:1.5rem;line-height:1.2}
.tile span{color:var(--soft);font-size:.85rem}
.dot{display:inline-block;width:.6rem;height:.6rem;border-radius:50%;margin-right:.35rem;vertical-align:.05rem}
.s-leased{background:var(--leased)}.s-ready{background:var(--ready)}.s-scheduled{background:var(--scheduled)}
.s-paused{background:var(--paused)}.s-succeeded{background:var(--succeeded)}.s-dead{background:var(--dead)}.s-canceled{background:var(--canceled)}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);border-radius:8px;overflow:hidden}
th,td{padding:.45rem .7rem;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{font-size:.8rem;font-weight:600;color:var(--soft);background:#f5f6f9}
th:first-child,td:first-child{text-align:left}
td.zero{color:#b8bdc9}
.scroll{overflow-x:auto}
.tasks{list-style:none;margin:0;padding:0;display:grid;gap:.45rem}
.task{background:var(--card);border:1px solid var(--line);border-left:4px solid var(--line);border-radius:6px;padding:.5rem .8rem}
.task.leased{border-left-color:var(--leased)}.task.ready{border-left-color:var(--ready)}.task.scheduled{border-left-color:var(--scheduled)}
.task.paused{border-left-color:var(--paused)}.task.succeeded{border-left-color:var(--succeeded)}.task.dead{border-left-color:var(--dead)}.task.canceled{border-left-color:var(--canceled)}
.task .title{font-weight:600;overflow-wrap:anywhere}
bdi{unicode-bidi:isolate}
.bidi{font:600 .75em ui-monospace,Menlo,monospace;color:#b5473a;border:1px dashed #b5473a;border-radius:3px;padding:0 .2em;margin:0 .1em}
.meta{color:var(--soft);font-size:.85rem}
.meta code,.key{font:.85rem ui-monospace,SFMono-Regular,Menlo,monospace}
.bucket{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.3rem 1rem .8rem;margin-bottom:1rem}
.bucket h3{margin:.7rem 0 .5rem}
.record{border-top:1px solid var(--line);padding-top:.6rem;margin-top:.6rem}
.record:first-of-type{border-top:0;margin-top:0}
.key{font-weight:600}
pre{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace;background:var(--code);border-radius:6px;padding:.7rem .9rem;margin:.4rem 0 0;max-height:22rem;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.empty{color:var(--soft);background:var(--card);border:1px dashed var(--line);border-radius:8px;padding:1rem}
footer{margin-top:2.5rem;color:var(--soft);font-size:.85rem}
a{color:var(--leased)}
</style></head><body><main>
<header>
<h1>Tessera board</h1><span class="ns">{{.Namespace}}</span>
<span class="asof">as of <time datetime="{{iso .Time}}">{{utc .Time}}</time> · <span id="freshness">reloads every {{.Refresh}} s</span></span>
</header>

<section class="tiles" aria-label="Public tasks by state">
{{- $totals := .Health.Totals}}
{{- range states}}
<div class="tile"><b>{{count $totals.Counts .}}</b><span><i class="dot s-{{.}}"></i>{{.}}</span></div>
{{- end}}
<div class="tile"><b>{{$totals.LiveLeases}}</b><span>live leases</span></div>
<div class="tile"><b>{{$totals.ExpiredLeases}}</b><span>expired leases</span></div>
</section>

<h2>Queues <span class="n">· {{len .Health.Queues}}</span></h2>
{{- if .Health.Queues}}
<div class="scroll"><table>
<thead><tr><th>queue</th>{{range states}}<th>{{.}}</th>{{end}}<th>live leases</th><th>expired</th><th>oldest ready waits</th></tr></thead>
<tbody>
{{- range .Health.Queues}}
{{- $q := .}}
<tr><td><code>{{.Queue}}</code></td>{{range states}}{{$n := count $q.Counts .}}<td{{if not $n}} class="zero"{{end}}>{{$n}}</td>{{end}}<td>{{.LiveLeases}}</td><td{{if not .ExpiredLeases}} class="zero"{{end}}>{{.ExpiredLeases}}</td><td>{{seconds .OldestReadyAgeSeconds}}</td></tr>
{{- end}}
</tbody>
</table></div>
<p class="meta">Ready counts include scheduled tasks (waiting for their run_at or a retry backoff).</p>
{{- else}}
<p class="empty">No public tasks yet. Enqueue one with <code>"public": true</code> and it shows up here.</p>
{{- end}}

{{- $now := .Time}}
{{- if .Groups}}
<h2>Tasks <span class="n">· newest {{.Shown}}{{if gt .Total .Shown}} of {{.Total}}{{end}}</span></h2>
{{- range .Groups}}
<h3><i class="dot s-{{.State}}"></i>{{.State}} <span class="n">· {{len .Tasks}}</span></h3>
<ul class="tasks">
{{- range .Tasks}}
<li class="task {{.State}}" data-task="{{.ID}}"><div class="title"><bdi>{{shown .Title}}</bdi></div>
<div class="meta">queue <code>{{.Queue}}</code> · priority {{.Priority}} · <code title="{{.ID}}">{{short .ID}}</code> ·
{{- if eq .State "scheduled"}} runs {{ago .RunAt $now}}{{else}} updated {{ago .UpdatedAt $now}}{{end}}</div></li>
{{- end}}
</ul>
{{- end}}
{{- end}}

<h2>Public records <span class="n">· {{len .Buckets}} bucket{{if ne (len .Buckets) 1}}s{{end}}</span></h2>
{{- range .Buckets}}
<section class="bucket"><h3>{{.Name}}</h3>
{{- range .Records}}
<div class="record"><span class="key">{{.Key}}</span> <span class="meta">· version {{.Version}} · written {{ago .UpdatedAt $now}}{{if .TaskID}} by task <code title="{{.TaskID}}">{{short .TaskID}}</code>{{end}}</span>
{{- if .Value}}
<pre>{{pretty .Value}}</pre>
{{- else}}
<p class="meta">The value ({{bytes .ValueBytes}}) is too large to show here.</p>
{{- end}}
</div>
{{- end}}
</section>
{{- else}}
<p class="empty">No public records yet. A bucket made public with <code>PUT /v1/buckets/{name}</code> and <code>{"public": true}</code> shows its records here.</p>
{{- end}}

<footer>
The same as JSON: <a href="{{.Prefix}}/v1/health">health</a> · <a href="{{.Prefix}}/v1/public/activity">activity of the last 24 h</a> ·
this page with <code>Accept: application/json</code>. With a key: <a href="/console">the console</a>. <a href="/">What is Tessera?</a>
</footer>
</main></body></html>
`))
