package httpapi

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"path"
	"reflect"
	"strconv"
	"strings"

	"github.com/tessera-dev/tessera/internal/discovery"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The operator console (/console): an HTML shell and a small script and
// style sheet, embedded in the binary — no CDN, no build step. The page
// itself holds no data and needs no key: the operator pastes a key once,
// the script keeps it in the tab's sessionStorage and sends it as a bearer
// header to the JSON API, so the server checks every read and action as it
// checks any client's. No cookie is ever set, so a page elsewhere cannot
// make the browser act with the key (no CSRF surface).

//go:embed console
var consoleFiles embed.FS

// consoleAsset is one embedded file, ready to serve.
type consoleAsset struct {
	body        []byte
	contentType string
	etag        string
}

// consoleAssets are the console's files by name; "" is the page.
var consoleAssets = func() map[string]*consoleAsset {
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	out := map[string]*consoleAsset{}
	entries, err := consoleFiles.ReadDir("console")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		body, err := consoleFiles.ReadFile("console/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		name := e.Name()
		if name == "index.html" {
			name = ""
		}
		out[name] = &consoleAsset{body: body, contentType: types[path.Ext(e.Name())], etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}()

// ConsoleCSP is the console's Content-Security-Policy: its own script and
// style only, no inline script, no eval, requests to this origin alone,
// never framed.
const ConsoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleAssetIn names an asset of the console, for the API description.
type consoleAssetIn struct {
	Asset string `json:"asset" in:"path"`
}

func (consoleAssetIn) Bounds() input.Bounds {
	var names []string
	for name := range consoleAssets {
		if name != "" {
			names = append(names, name)
		}
	}
	return input.Bounds{"asset": input.Enum(names...).Doc("a file of the console")}
}

// mountConsole registers the console's page and files.
func (s *Server) mountConsole() {
	s.handle("GET /console", http.HandlerFunc(s.serveConsole))
	s.handle("GET /console/{asset}", http.HandlerFunc(s.serveConsole))
}

// consoleRoutes describe the console's routes.
func consoleRoutes() []discovery.Route {
	return []discovery.Route{
		{Method: http.MethodGet, Path: "/console", Auth: "public", RawResponse: true, RawType: "text/html", Cached: true,
			Summary: "The operator console: paste a key, then watch and act on queues and tasks (the key stays in the tab, sent as a bearer header)"},
		{Method: http.MethodGet, Path: "/console/{asset}", Auth: "public", RawResponse: true, RawType: "*/*", Cached: true,
			In: reflect.TypeFor[consoleAssetIn](), Summary: "The console's script and style sheet (and the board's script)"},
	}
}

func (s *Server) serveConsole(w http.ResponseWriter, r *http.Request) {
	a := consoleAssets[r.PathValue("asset")]
	if a == nil || r.PathValue("asset") == "" && strings.HasSuffix(r.URL.Path, "/") {
		writeError(w, tessera.Errorf(tessera.CodeNotFound, "no console file %s", input.Clip(r.URL.Path)))
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", ConsoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("ETag", a.etag)
	// Asked again each time, so a new binary's console is used at once.
	h.Set("Cache-Control", "no-cache")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.body)
}

// keyPage is what a browser gets for a page that needs a key it cannot
// send (a namespace's board): what to do, not a JSON 401.
var keyPage = template.Must(template.New("key").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>A key is needed · Tessera</title><link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/console/app.css"></head>
<body class="plain"><main class="narrow">
<h1>This page needs a key</h1>
<p>{{.What}} belongs to namespace <code>{{.Namespace}}</code>, which only a key with a grant for it may read.
A browser cannot send a key with a link, so open it in the console instead:</p>
<p><a class="button" href="/console#/ns/{{.Namespace}}">Open the console</a></p>
<p>Paste your key there once (it stays in this tab, sent as a bearer header); the console shows the
namespace's queues and tasks and follows them live.</p>
<p class="meta">{{.Message}} · <a href="/board">main's public board</a> needs no key · <a href="/">What is Tessera?</a></p>
</main></body></html>
`))

// writeKeyPage answers a browser's keyless request for a page of ns with
// the key page, under the refusal's status.
func (s *Server) writeKeyPage(w http.ResponseWriter, ns string, e *tessera.Error, status int) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", ConsoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Vary", "Accept")
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="tessera"`)
	}
	w.WriteHeader(status)
	p := ops.ProblemOf(e, status)
	if err := keyPage.Execute(w, map[string]string{"What": "This board", "Namespace": ns, "Message": p.Message}); err != nil {
		s.log.Error("key page", "err", err)
	}
}

// wantsPage reports whether a request comes from a browser navigating:
// it asks for HTML.
func wantsPage(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}
