package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			e = tessera.Errorf(tessera.CodeUnavailable, "the request was canceled")
		case diskFault(err) != nil:
			e = diskFault(err)
		default:
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

// diskFault is the 503 unavailable of a filesystem that cannot take
// more (blob bytes live beside the store), nil for any other error.
func diskFault(err error) *tessera.Error {
	why := ""
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		why = "the disk is full"
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.EROFS):
		why = "its files cannot be read or written"
	default:
		return nil
	}
	return &tessera.Error{Code: tessera.CodeUnavailable, RetryAfter: 30 * time.Second,
		Message: "storage is unavailable (" + why + "); the operation was not completed"}
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
		if f, ok := badField(body, dst, err); ok {
			return f
		}
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body holds more than one JSON value")
	}
	return checkFields(body, dst)
}

// field is what the decoder demands of one body field.
type field struct {
	// required fields are those without omitempty or omitzero: the same
	// rule the API description marks them required by.
	required bool
	// nullable fields take null: pointers, lists and maps (encoding/json
	// writes an empty one as null, and the API description says so) and
	// any-JSON values.
	nullable bool
	typ      reflect.Type
}

// bodyFields lists the JSON fields of dst's struct type, nil if it is
// not a struct. Each type's list is made once: every request decodes a
// body, and walking its type took a third of the check's time.
func bodyFields(dst any) map[string]field {
	t := reflect.TypeOf(dst)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	if f, ok := fieldsByType.Load(t); ok {
		return f.(map[string]field)
	}
	f, _ := fieldsByType.LoadOrStore(t, structFields(t))
	return f.(map[string]field)
}

// fieldsByType holds each body type's fields, which no caller changes.
var fieldsByType sync.Map

func structFields(t reflect.Type) map[string]field {
	fields := map[string]field{}
	var collect func(reflect.Type)
	collect = func(t reflect.Type) {
		for f := range t.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct && name == "":
				collect(f.Type)
			case name != "-" && f.IsExported():
				k := f.Type.Kind()
				fields[cmp.Or(name, f.Name)] = field{
					required: !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero"),
					nullable: k == reflect.Pointer || k == reflect.Slice || k == reflect.Map || k == reflect.Interface || f.Type == rawJSON,
					typ:      f.Type,
				}
			}
		}
	}
	collect(t)
	return fields
}

var rawJSON = reflect.TypeFor[json.RawMessage]()

// checkFields holds the body's top-level keys to dst's fields: exactly
// (encoding/json also takes a key that matches only case-insensitively,
// "TITLE", and a key given twice, keeping the last), every required field
// present, null only where the field takes it, and every value one that
// any JSON reader reads alike (checkValue).
func checkFields(body []byte, dst any) error {
	fields := bodyFields(dst)
	if fields == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	seen := map[string]bool{}
	// The decoder accepted the body, so it is an object or null, which
	// reads as {}.
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return missingField(fields, seen)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return decodeError(err)
		}
		key, _ := tok.(string)
		f, ok := fields[key]
		if !ok {
			return tessera.Invalid(key, "unknown field %q", key)
		}
		if seen[key] {
			return tessera.Invalid(key, "field %q is given twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return decodeError(err)
		}
		if string(raw) == "null" && !f.nullable {
			return tessera.Invalid(key, "%s must not be null", key)
		}
		if err := checkValue(raw); err != nil {
			return tessera.Invalid(key, "%s %s", key, err)
		}
	}
	return missingField(fields, seen)
}

// missingField names the first required field (by name) not seen.
func missingField(fields map[string]field, seen map[string]bool) error {
	var missing []string
	for name, f := range fields {
		if f.required && !seen[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return tessera.Invalid(missing[0], "%s is required", missing[0])
	}
	return nil
}

// checkValue refuses what valid JSON may hold but readers disagree on
// (RFC 8259 §8.2, §6; RFC 7493): a string escape of half a surrogate pair,
// which encoding/json turns into U+FFFD and other readers reject or keep,
// and a number beyond the range of an IEEE-754 double, which most readers
// cannot hold. raw is valid JSON.
func checkValue(raw []byte) error {
	for i := 0; i < len(raw); i++ {
		switch ch := raw[i]; {
		case ch == '"':
			end, err := checkString(raw, i+1)
			if err != nil {
				return err
			}
			i = end
		case ch == '-' || ch >= '0' && ch <= '9':
			j := i
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			if _, err := strconv.ParseFloat(string(raw[i:j]), 64); err != nil {
				return fmt.Errorf("holds the number %.40s, beyond the range of a double", raw[i:j])
			}
			i = j - 1
		}
	}
	return nil
}

// checkString scans the string whose contents start at raw[i] and returns
// the index of its closing quote.
func checkString(raw []byte, i int) (int, error) {
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			return i, nil
		case '\\':
			if raw[i+1] != 'u' {
				i++
				continue
			}
			r := hex4(raw[i+2 : i+6])
			i += 5
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, errors.New("holds a lone low surrogate escape")
			case r >= 0xD800 && r <= 0xDBFF:
				if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
					return 0, errors.New("holds a lone high surrogate escape")
				}
				if low := hex4(raw[i+3 : i+7]); low < 0xDC00 || low > 0xDFFF {
					return 0, errors.New("holds a lone high surrogate escape")
				}
				i += 6
			}
		}
	}
	return i, nil
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

// badField names the top-level field of body that made the decoder fail
// with err when the decoder itself does not (a value's own UnmarshalJSON
// failing, as time.Time's does for a number), by decoding each field on
// its own in body order.
func badField(body []byte, dst any, err error) (*tessera.Error, bool) {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	if errors.As(err, &typeErr) || errors.As(err, &syntaxErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, false
	}
	t := reflect.TypeOf(dst)
	fields := bodyFields(dst)
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') || t.Kind() != reflect.Pointer {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return nil, false
		}
		one, _ := json.Marshal(map[string]json.RawMessage{name: raw})
		if json.Unmarshal(one, reflect.New(t.Elem()).Interface()) == nil {
			continue
		}
		if ft := fields[name].typ; ft == timeType || ft == reflect.PointerTo(timeType) {
			return tessera.Invalid(name, "%s must be an RFC 3339 timestamp string", name), true
		}
		return tessera.Invalid(name, "%s does not fit this route", name), true
	}
	return nil, false
}

var timeType = reflect.TypeFor[time.Time]()

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return tessera.Errorf(tessera.CodeInvalidRequest, "the request body must be a JSON object")
		}
		return tessera.Invalid(field, "%s must be %s", field, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body is not valid JSON")
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
