// Package tessera holds the domain vocabulary every other package shares:
// tasks, runs, leases, principals, keys and scopes, the error type with the
// API's error codes, identifiers and the clock. It imports only the standard
// library, so the store, the core and the adapters can all depend on it.
package tessera

import (
	"errors"
	"fmt"
	"time"
)

// Code is one of the API's error codes (SPEC §5). Adapters map each code to
// a transport status in exactly one place.
type Code string

const (
	CodeInvalidRequest        Code = "invalid_request"
	CodeUnauthorized          Code = "unauthorized"
	CodeForbidden             Code = "forbidden"
	CodeNotFound              Code = "not_found"
	CodeMethodNotAllowed      Code = "method_not_allowed"
	CodeLeaseLost             Code = "lease_lost"
	CodeVersionConflict       Code = "version_conflict"
	CodeInvalidState          Code = "invalid_state"
	CodeIdempotencyConflict   Code = "idempotency_conflict"
	CodePayloadTooLarge       Code = "payload_too_large"
	CodeRateLimited           Code = "rate_limited"
	CodeStorageQuotaExhausted Code = "storage_quota_exhausted"
	CodeUnavailable           Code = "unavailable"
	CodeInternal              Code = "internal"
)

// Error is an error a client may see. Anything that is not an *Error is an
// internal fault: it is logged and shown only as CodeInternal.
type Error struct {
	Code    Code
	Message string
	// Field names the request field at fault, for CodeInvalidRequest.
	Field string
	// RetryAfter, when set, tells the client how long to wait.
	RetryAfter time.Duration
	// ResetAt is when a storage allowance is expected to reset.
	ResetAt time.Time
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports a bad value in the named request field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err's *Error, or CodeInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Shared errors whose wording never varies.
var (
	// ErrUnauthorized is the single answer for an unknown, expired or
	// revoked key: the body must not tell them apart, or a 401 would say
	// which keys exist.
	ErrUnauthorized = &Error{Code: CodeUnauthorized, Message: "the key is not valid: unknown, expired or revoked"}
	ErrLeaseLost    = &Error{Code: CodeLeaseLost, Message: "the lease token is not the task's live lease"}
)

// NotFound reports a missing resource of the given kind.
func NotFound(kind, id string) *Error {
	return Errorf(CodeNotFound, "%s %q not found", kind, id)
}
