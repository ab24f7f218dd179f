package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

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

// writeError answers e with the error body and the status its code has.
func writeError(w http.ResponseWriter, e *tessera.Error) {
	writeFault(w, e, ops.Status(e.Code))
}

// writeFault answers e with the error body and status.
func writeFault(w http.ResponseWriter, e *tessera.Error, status int) {
	writeJSON(w, status, errorBody(w.Header(), e))
}

// errorBody is e's error body; it sets the headers that go with it.
func errorBody(h http.Header, e *tessera.Error) ErrorBody {
	p := ops.ProblemOf(e, ops.Status(e.Code))
	body := ErrorBody{Error: ErrorDetail{Code: e.Code, Message: p.Message}}
	extra := ErrorDetailExtra{Field: p.Field, RetryAfter: p.RetryAfter, ResetAt: p.ResetAt}
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if extra != (ErrorDetailExtra{}) {
		body.Error.Details = &extra
	}
	switch p.Status {
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
