package ops

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// StatusClientClosed is what a call is logged and measured with when its
// client went away before the answer (nginx's 499): not a server fault.
const StatusClientClosed = 499

// Status is the one mapping from error code to HTTP status; MCP results
// carry the same status (SPEC §11).
func Status(code tessera.Code) int {
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

// Fault is the one mapping from any error to the API's: an *tessera.Error
// as it is; storage that cannot serve (store.Unavailable, a full or failing
// disk under the blob bytes, an object store that does not answer) as unavailable with its retry hint; a
// canceled request as unavailable; anything else as internal, which shows
// nothing of itself (the caller logs it).
func Fault(err error) *tessera.Error {
	var e *tessera.Error
	var u *store.UnavailableError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &u):
		return u.API()
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return tessera.Errorf(tessera.CodeUnavailable, "the request was canceled")
	case errors.Is(err, blobs.ErrUnavailable):
		return &tessera.Error{Code: tessera.CodeUnavailable, RetryAfter: 30 * time.Second,
			Message: "blob storage is unavailable (the object store did not answer); the operation was not completed: retry later"}
	}
	if d := diskFault(err); d != nil {
		return d
	}
	return tessera.Errorf(tessera.CodeInternal, "internal error")
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

// faultLog tells the operator of the errors a client cannot act on:
// internal faults always, and storage that cannot serve (a full disk, an
// I/O error) at most every 10 s, or a full disk would fill the log as fast
// as requests come.
type faultLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// note logs err, which answered as e, when the operator must hear of it.
func (f *faultLog) note(log *slog.Logger, err error, e *tessera.Error) {
	switch {
	case e.Code == tessera.CodeInternal:
		log.Error("internal error", "err", err)
		return
	case e.Code != tessera.CodeUnavailable || error(e) == err || errors.Is(err, context.Canceled):
		return // the API's own answer, or a client that went away
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.last) < 10*time.Second {
		f.suppressed++
		return
	}
	log.Warn("storage unavailable: answering 503", "err", err, "unlogged_since_last", f.suppressed)
	f.last, f.suppressed = time.Now(), 0
}

// Problem is an error as both transports tell it: the HTTP error body
// (SPEC §5) and the MCP tool result (SPEC §11) are two shapes of it.
type Problem struct {
	Status     int        `json:"status" doc:"the HTTP status the API gives this failure"`
	Code       string     `json:"code" doc:"the API error code, e.g. lease_lost or storage_quota_exhausted"`
	Message    string     `json:"message" doc:"what went wrong, for a person or a model"`
	Field      string     `json:"field,omitempty" doc:"the input at fault, for invalid_request"`
	RetryAfter int        `json:"retry_after,omitempty" doc:"seconds to wait before trying again"`
	ResetAt    *time.Time `json:"reset_at,omitempty" doc:"when the storage allowance is expected to reset"`
}

// ProblemOf is e told with status.
func ProblemOf(e *tessera.Error, status int) Problem {
	p := Problem{Status: status, Code: string(e.Code), Message: e.Message, Field: e.Field}
	if e.RetryAfter > 0 {
		// Rounded up: a client that waits what it is told is not early.
		p.RetryAfter = int(math.Ceil(e.RetryAfter.Seconds()))
	}
	if !e.ResetAt.IsZero() {
		t := e.ResetAt.UTC()
		p.ResetAt = &t
	}
	return p
}
