package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// MaxJSONDepth bounds nesting in any request body (SPEC §5).
const MaxJSONDepth = 32

// statusOf is the one mapping from error code to HTTP status.
func statusOf(code tessera.Code) int {
	switch code {
	case tessera.CodeInvalidRequest:
		return http.StatusBadRequest
	case tessera.CodeUnauthorized:
		return http.StatusUnauthorized
	case tessera.CodeForbidden:
		return http.StatusForbidden
	case tessera.CodeNotFound:
		return http.StatusNotFound
	case tessera.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case tessera.CodeLeaseLost, tessera.CodeVersionConflict, tessera.CodeInvalidState, tessera.CodeIdempotencyConflict:
		return http.StatusConflict
	case tessera.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case tessera.CodeRateLimited:
		return http.StatusTooManyRequests
	case tessera.CodeStorageQuotaExhausted, tessera.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// ErrorBody is the error shape of every failure (SPEC §5).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    tessera.Code      `json:"code"`
	Message string            `json:"message"`
	Details *ErrorDetailExtra `json:"details,omitempty"`
}

// ErrorDetailExtra carries what a client needs to act on an error.
type ErrorDetailExtra struct {
	Field      string     `json:"field,omitempty"`
	RetryAfter int        `json:"retry_after,omitempty"`
	ResetAt    *time.Time `json:"reset_at,omitempty"`
}

// writeError answers err with the error body. Errors that are not
// *tessera.Error are internal: logged, and shown only as "internal".
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	var e *tessera.Error
	if !errors.As(err, &e) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			e = tessera.Errorf(tessera.CodeUnavailable, "the request was canceled")
		} else {
			log.Error("internal error", "err", err)
			e = tessera.Errorf(tessera.CodeInternal, "internal error")
		}
	}
	body := errorBody(w.Header(), e)
	writeJSON(w, statusOf(e.Code), body)
}

// errorBody is e's error body; it sets the headers that go with it.
func errorBody(h http.Header, e *tessera.Error) ErrorBody {
	body := ErrorBody{Error: ErrorDetail{Code: e.Code, Message: e.Message}}
	var extra ErrorDetailExtra
	if e.Field != "" {
		extra.Field = e.Field
	}
	if e.RetryAfter > 0 {
		secs := int(math.Ceil(e.RetryAfter.Seconds()))
		extra.RetryAfter = secs
		h.Set("Retry-After", strconv.Itoa(secs))
	}
	if !e.ResetAt.IsZero() {
		t := e.ResetAt.UTC()
		extra.ResetAt = &t
	}
	if extra != (ErrorDetailExtra{}) {
		body.Error.Details = &extra
	}
	switch statusOf(e.Code) {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="tessera"`)
	case http.StatusRequestEntityTooLarge:
		// The rest of the body is read and discarded (linger), then the
		// connection closes: what follows on it is no request.
		h.Set("Connection", "close")
	}
	return body
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (c *call) json(status int, v any) error {
	writeJSON(c.w, status, v)
	return nil
}

func tooLarge() *tessera.Error {
	return tessera.Errorf(tessera.CodePayloadTooLarge, "the request body is over %d bytes", MaxBodyBytes)
}

// decode reads the body into dst under the rules of §5: bounded size,
// valid UTF-8, nesting ≤ 32, no unknown fields, nothing after the value.
// An empty body decodes as {}.
func (c *call) decode(dst any) error {
	body, err := io.ReadAll(c.r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		var cut *tessera.Error // the edge's read deadline (edge.go)
		switch {
		case errors.As(err, &mbe):
			return tooLarge()
		case errors.As(err, &cut):
			return cut
		}
		return tessera.Errorf(tessera.CodeInvalidRequest, "could not read the request body")
	}
	return DecodeJSON(body, dst)
}

// DecodeJSON is decode's body check, exported for the fuzz targets.
func DecodeJSON(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if !utf8.Valid(body) {
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body is not valid UTF-8")
	}
	if jsonDepth(body) > MaxJSONDepth {
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body nests deeper than %d", MaxJSONDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var timeErr *time.ParseError
		if errors.As(err, &timeErr) {
			// The decoder does not say which field held the bad timestamp.
			f := badTimeField(body, dst)
			return tessera.Invalid(f, "%s must be an RFC 3339 timestamp", cmp.Or(f, "timestamps"))
		}
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body holds more than one JSON value")
	}
	if err := exactKeys(body, dst); err != nil {
		return err
	}
	return nil
}

// badTimeField names the top-level field of body whose value is not a
// timestamp dst accepts, by decoding each field on its own ("" if none).
// exactKeys holds the body's top-level keys to the field names exactly:
// encoding/json also accepts a key that matches only case-insensitively
// ("TITLE"), and a key given twice (keeping the last), and §5 rejects
// unknown fields.
func exactKeys(body []byte, dst any) error {
	t := reflect.TypeOf(dst)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	var collect func(reflect.Type)
	collect = func(t reflect.Type) {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct && name == "":
				collect(f.Type)
			case name != "-" && f.IsExported():
				names[cmp.Or(name, f.Name)] = true
			}
		}
	}
	collect(t)
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // the decoder accepted it: null
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return decodeError(err)
		}
		key, _ := tok.(string)
		if !names[key] {
			return tessera.Invalid(key, "unknown field %q", key)
		}
		if seen[key] {
			return tessera.Invalid(key, "field %q is given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return decodeError(err)
		}
	}
	return nil
}

func badTimeField(body []byte, dst any) string {
	var fields map[string]json.RawMessage
	t := reflect.TypeOf(dst)
	if t == nil || t.Kind() != reflect.Pointer || json.Unmarshal(body, &fields) != nil {
		return ""
	}
	for name, v := range fields {
		one, err := json.Marshal(map[string]json.RawMessage{name: v})
		if err != nil {
			continue
		}
		var timeErr *time.ParseError
		if errors.As(json.Unmarshal(one, reflect.New(t.Elem()).Interface()), &timeErr) {
			return name
		}
	}
	return ""
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return tessera.Errorf(tessera.CodeInvalidRequest, "the request body must be a JSON object")
		}
		return tessera.Invalid(field, "%s must be %s", field, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body is not valid JSON")
	case errors.As(err, &timeErr):
		return tessera.Errorf(tessera.CodeInvalidRequest, "timestamps must be RFC 3339")
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return tessera.Invalid(f, "unknown field %q", f)
	}
	return tessera.Errorf(tessera.CodeInvalidRequest, "the request body does not fit this route: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return "of another type"
}

// jsonDepth returns the deepest nesting of arrays and objects in b, looking
// past strings. It does not validate; the decoder does that afterwards.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, ch := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
		case ch == '"':
			inString = true
		case ch == '{' || ch == '[':
			depth++
			deepest = max(deepest, depth)
		case ch == '}' || ch == ']':
			depth--
		}
	}
	return deepest
}

// idempotencyKey reads and checks the Idempotency-Key header.
func (c *call) idempotencyKey() (string, error) {
	k := c.r.Header.Get("Idempotency-Key")
	if k != "" && !core.ValidIdempotencyKey(k) {
		return "", tessera.Invalid("Idempotency-Key", "Idempotency-Key must be 1–%d printable ASCII characters", core.MaxIdempotencyKeyLen)
	}
	return k, nil
}

// queryInt parses an optional integer query parameter within [lo, hi].
func (c *call) queryInt(name string, lo, hi int64) (int64, error) {
	v := c.r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, tessera.Invalid(name, "%s must be an integer in %d–%d", name, lo, hi)
	}
	return n, nil
}

// query returns a bounded query parameter.
func (c *call) query(name string) (string, error) {
	v := c.r.URL.Query().Get(name)
	if len(v) > 256 || !utf8.ValidString(v) {
		return "", tessera.Invalid(name, "%s is too long", name)
	}
	return v, nil
}

// pathID returns a path segment that must look like an id; anything else
// cannot exist, so it is not found.
func (c *call) pathID(name string) (string, error) {
	v := c.r.PathValue(name)
	if v == "" || len(v) > 64 {
		return "", tessera.NotFound(name, v)
	}
	for _, r := range v {
		if !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return "", tessera.NotFound(name, v)
		}
	}
	return v, nil
}
