package client

import (
	"net/http"
	"testing"
)

// Whatever a server (or something posing as one) answers, reading it as
// an error never panics and always yields a code and a message.
func FuzzAPIError(f *testing.F) {
	f.Add(409, "5", []byte(`{"error":{"code":"lease_lost","message":"gone","details":{"field":"x","retry_after":5}}}`))
	f.Add(503, "3600", []byte(`<html>bad gateway</html>`))
	f.Add(429, "-1", []byte(`{"error":{"code":"","details":{"reset_at":"nope"}}}`))
	f.Add(500, "1e400", []byte(``))
	f.Fuzz(func(t *testing.T, status int, retry string, body []byte) {
		res := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {retry}}}
		e := apiError(res, body)
		if e.Code == "" || e.Message == "" {
			t.Fatalf("status %d body %q: %+v", status, body, e)
		}
		if e.RetryAfter < 0 {
			t.Fatalf("negative Retry-After from %q", retry)
		}
		_ = e.Error()
	})
}
