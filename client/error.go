package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Error codes of the API (its error body's "code").
const (
	CodeInvalidRequest        = "invalid_request"
	CodeUnauthorized          = "unauthorized"
	CodeForbidden             = "forbidden"
	CodeNotFound              = "not_found"
	CodeLeaseLost             = "lease_lost"
	CodeVersionConflict       = "version_conflict"
	CodeInvalidState          = "invalid_state"
	CodeIdempotencyConflict   = "idempotency_conflict"
	CodePayloadTooLarge       = "payload_too_large"
	CodeRateLimited           = "rate_limited"
	CodeStorageQuotaExhausted = "storage_quota_exhausted"
	CodeUnavailable           = "unavailable"
	CodeInternal              = "internal"
)

// Error is a failure the server answered: its HTTP status and the error
// body {"error":{"code","message","details"}}.
type Error struct {
	Status  int
	Code    string
	Message string
	Details ErrorDetails
	// RetryAfter is the server's advice (the Retry-After header), if any.
	RetryAfter time.Duration
}

// ErrorDetails are the error body's details.
type ErrorDetails struct {
	Field      string     `json:"field,omitempty"`
	RetryAfter int        `json:"retry_after,omitempty"`
	ResetAt    *time.Time `json:"reset_at,omitempty"`
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Details.Field != "" {
		msg += " (field " + e.Details.Field + ")"
	}
	return msg
}

// ErrorCode returns the API error code of err, or "" when err is not an
// *Error (a connection failure, a canceled context).
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsLeaseLost reports whether the lease token is not (or no longer) the
// task's live lease: the work is no longer this holder's.
func IsLeaseLost(err error) bool { return ErrorCode(err) == CodeLeaseLost }

// IsNotFound reports a missing task, record, blob, key or principal.
func IsNotFound(err error) bool { return ErrorCode(err) == CodeNotFound }

// IsVersionConflict reports a record write whose if_version did not match.
func IsVersionConflict(err error) bool { return ErrorCode(err) == CodeVersionConflict }

// IsInvalidState reports a change the task's state does not allow.
func IsInvalidState(err error) bool { return ErrorCode(err) == CodeInvalidState }

// IsConflict reports any 409: lease lost, version conflict, invalid state
// or an idempotency key reused with another body.
func IsConflict(err error) bool { return status(err) == http.StatusConflict }

// IsUnauthorized reports a missing, unknown, expired or revoked key.
func IsUnauthorized(err error) bool { return ErrorCode(err) == CodeUnauthorized }

// IsForbidden reports a key without the grant or scope the call needs.
func IsForbidden(err error) bool { return ErrorCode(err) == CodeForbidden }

// IsRateLimited reports a 429; Error.RetryAfter says when to come back.
func IsRateLimited(err error) bool { return ErrorCode(err) == CodeRateLimited }

// IsUnavailable reports a 503: the server draining, storage unreachable,
// or the storage allowance spent (then Details.ResetAt says until when).
func IsUnavailable(err error) bool { return status(err) == http.StatusServiceUnavailable }

func status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}
