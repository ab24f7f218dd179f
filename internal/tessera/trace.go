package tessera

import "strings"

// Trace is a W3C trace context (https://www.w3.org/TR/trace-context/): the
// traceparent of the span a task was enqueued in, and its tracestate.
type Trace struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// MaxTracestateLen bounds a tracestate: the length W3C asks every
// platform to pass on whole.
const MaxTracestateLen = 512

// ValidTraceparent reports whether s is a traceparent of version 00
// (version-traceid-parentid-flags, lowercase hex) whose ids are not all
// zeros, as W3C asks a receiver to check before it continues a trace.
func ValidTraceparent(s string) bool {
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' || s[:2] != "00" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '-' && !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s[3:35] != strings.Repeat("0", 32) && s[36:52] != strings.Repeat("0", 16)
}

// ValidTracestate reports whether s may be carried as a tracestate:
// at most MaxTracestateLen printable ASCII characters.
func ValidTracestate(s string) bool {
	if len(s) > MaxTracestateLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
