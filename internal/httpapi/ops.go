package httpapi

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// registerOps registers every operation's route, and again under
// /ns/{namespace} where it acts in a namespace.
func (s *Server) registerOps() {
	for _, o := range ops.Routes() {
		s.handle(o.HTTP.Method+" "+o.HTTP.Path, s.opHandler(o, false))
		if o.HTTP.Namespaced {
			s.handle(o.HTTP.Method+" /ns/{namespace}"+o.HTTP.Path, s.opHandler(o, true))
		}
	}
}

// opHandler decodes a request into a call of o, has the operation run
// (ops.Exec.Do: the one admission path), and encodes what it came to.
func (s *Server) opHandler(o *ops.Op, namespaced bool) http.HandlerFunc {
	route := o.HTTP.Method + " " + o.HTTP.Path
	return func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := w.(*statusRecorder); ok {
			rec.route, rec.op = route, true
		}
		ns := tessera.MainNamespace
		if namespaced {
			ns = r.PathValue("namespace")
		}
		req := ops.Request{Transport: "http", NS: ns, Keyed: r.Header.Get("Authorization") != "", Trace: ops.TraceOf(r.Header),
			Authenticate: func() (*auth.Actor, error) { return s.authenticate(r) },
			Bind:         func(in any, a *auth.Actor) error { return s.bind(w, r, o, in, a) },
		}
		if o.HTTP.RawBody {
			req.Body = uploadBody{r}
		}
		if o.HTTP.Stream {
			sink := newSSESink(w)
			defer sink.done()
			req.Events = sink
			if res := s.exec.Do(r.Context(), o, req); res.Err != nil && sink.opened {
				sink.Fault(res.Err, res.Status) // too late for a status
			} else {
				s.answer(w, r, o, res)
			}
			return
		}
		s.answer(w, r, o, s.exec.Do(r.Context(), o, req))
	}
}

// bind reads a request into in, an operation's input: path parameters,
// query parameters and headers by the fields that name them, and the body
// under the byte limit of a's requests (SPEC §5: 64 KiB for a session's).
func (s *Server) bind(w http.ResponseWriter, r *http.Request, o *ops.Op, in any, a *auth.Actor) error {
	if limit := core.BodyLimit(a, s.bodyLimit(r)); limit < s.bodyLimit(r) {
		if r.ContentLength > limit {
			return tessera.Errorf(tessera.CodePayloadTooLarge, "a demo session's request body is at most %d bytes", limit)
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	v := reflect.ValueOf(in).Elem()
	query := r.URL.Query()
	for _, f := range o.Input().Fields {
		var raw string
		switch f.In {
		case input.InPath:
			raw = r.PathValue(f.Name)
		case input.InHeader:
			raw = r.Header.Get(f.Header)
		case input.InQuery:
			raw = query.Get(f.Name)
		default:
			continue
		}
		if raw == "" {
			continue
		}
		if err := setParam(v.FieldByIndex(f.Index), f, raw); err != nil {
			return err
		}
	}
	switch {
	case o.HTTP.Stream:
		// A body means nothing here, but it is read: net/http notices a
		// client gone only by reading its connection, which it starts
		// once the body is in, and a stream otherwise runs until a write
		// fails.
		_, err := readBody(r)
		return err
	case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodDelete:
		return nil // a body there means nothing, and is not read
	case o.HTTP.RawBody:
		return nil
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return input.Decode(body, in, input.Options{})
}

// readBody reads a request's body, under its limit and the edge's pace.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		var cut *tessera.Error // the edge's read deadline (edge.go)
		switch {
		case errors.As(err, &mbe):
			return nil, tessera.Errorf(tessera.CodePayloadTooLarge, "the request body is over %d bytes", mbe.Limit)
		case errors.As(err, &cut):
			return nil, cut
		}
		return nil, tessera.Errorf(tessera.CodeInvalidRequest, "could not read the request body")
	}
	return body, nil
}

// setParam sets a field from its text in a path, query or header.
func setParam(v reflect.Value, f *input.Field, raw string) error {
	name := f.Name
	if f.In == input.InHeader {
		name = f.Header
	}
	if !utf8.ValidString(raw) {
		return tessera.Invalid(name, "%s is not valid UTF-8", name)
	}
	if v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.String:
		v.SetString(raw)
	case v.CanInt():
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return tessera.Invalid(name, "%s must be an integer", name)
		}
		v.SetInt(n)
	case v.Type() == reflect.TypeFor[time.Time]():
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return tessera.Invalid(name, "%s must be an RFC 3339 time", name)
		}
		v.Set(reflect.ValueOf(t))
	}
	return nil
}

// answer encodes what a call came to.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, o *ops.Op, res *ops.Result) {
	if res.Err != nil {
		if o.HTTP.HTML && (res.Status == http.StatusUnauthorized || res.Status == http.StatusForbidden) && wantsPage(r) {
			s.writeKeyPage(w, r.PathValue("namespace"), res.Err, res.Status)
			return
		}
		writeFault(w, renameHeaderField(o, res.Err), res.Status)
		return
	}
	h := w.Header()
	if o.Public {
		// As fresh as its snapshot, which any state change drops: caches
		// must ask again; under a key it is private.
		h.Set("Cache-Control", "no-cache")
		if res.Actor != nil {
			h.Set("Cache-Control", "private, no-cache")
		}
	}
	if o.HTTP.Empty != nil {
		if extra, empty := o.HTTP.Empty(res.Out); empty {
			for k, v := range extra {
				h[k] = v
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	switch {
	case o.HTTP.Stream:
		// The stream has written itself, and ended.
	case o.Out == nil:
		w.WriteHeader(res.Status)
	case o.HTTP.RawResponse:
		s.serveBlob(w, r, res.Out.(*ops.Blob))
	case o.HTTP.HTML:
		h.Set("Vary", "Accept")
		if wantsJSON(r.Header.Get("Accept")) {
			writeJSON(w, res.Status, res.Out)
			return
		}
		if err := s.writeBoardPage(w, res.Call.NS, res.Out.(*core.Board)); err != nil {
			s.log.Error("board page", "err", err)
		}
	default:
		writeJSON(w, res.Status, res.Out)
	}
}

// renameHeaderField names a header the way HTTP clients send it: the
// input calls it by its argument name (idempotency_key).
func renameHeaderField(o *ops.Op, e *tessera.Error) *tessera.Error {
	if e.Field == "" {
		return e
	}
	f := o.Input().Field(e.Field)
	if f == nil || f.In != input.InHeader {
		return e
	}
	c := *e
	c.Field = f.Header
	c.Message = f.Header + strings.TrimPrefix(e.Message, e.Field)
	return &c
}

// uploadBody reads a raw upload's bytes, turning the edge's byte limit
// into the byte store's, so an oversized upload answers 413 whichever
// notices first. It reads r.Body as bind left it (held to the caller's
// limit).
type uploadBody struct{ r *http.Request }

func (b uploadBody) Read(p []byte) (int, error) {
	n, err := b.r.Body.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = blobs.ErrTooLarge
	}
	return n, err
}

// serveBlob streams a blob's bytes. http.ServeContent answers Range (206),
// If-None-Match against the ETag set here (304) and HEAD; blobs never
// change, so the ETag is the hash and caches may keep them (privately:
// reads need a key).
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, b *ops.Blob) {
	defer b.Body.Close()
	h := w.Header()
	h.Set("ETag", `"`+b.Info.SHA256+`"`)
	h.Set("Content-Type", b.Info.ContentType)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	// Uploaded bytes are never run as a page of this origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	http.ServeContent(&rangeRefusal{ResponseWriter: w, size: b.Info.Size}, r, "", b.Info.CreatedAt, b.Body)
}

// rangeRefusal gives http.ServeContent's 416, which it writes as plain
// text, the error body every answer carries.
type rangeRefusal struct {
	http.ResponseWriter
	size    int64
	refused bool
}

func (w *rangeRefusal) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.refused = true
	e := tessera.Invalid("Range", "the Range asked for lies outside the blob's %d bytes", w.size)
	writeJSON(w.ResponseWriter, code, errorBody(w.Header(), e))
}

func (w *rangeRefusal) Write(p []byte) (int, error) {
	if w.refused {
		return len(p), nil // ServeContent's plain-text message
	}
	return w.ResponseWriter.Write(p)
}

// bodyLimit is the byte limit of a request's body (SPEC §5): 1 MiB, except
// the blob upload route, whose raw bytes may reach the blob limit.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPut && isUploadPath(r.URL.Path) {
		return s.core.MaxBlobBytes()
	}
	return MaxBodyBytes
}

// isUploadPath reports whether p is /v1/blobs/uploads/{id}, with or
// without a /ns/{namespace} prefix.
func isUploadPath(p string) bool {
	if rest, ok := strings.CutPrefix(p, "/ns/"); ok {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return false
		}
		p = rest[i:]
	}
	id, ok := strings.CutPrefix(p, "/v1/blobs/uploads/")
	return ok && id != "" && !strings.Contains(id, "/")
}

// wantsJSON reports whether a client asked for JSON rather than a page.
func wantsJSON(accept string) bool {
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}
