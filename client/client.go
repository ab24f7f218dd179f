package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultURL is where `tessera serve` listens unless told otherwise.
const DefaultURL = "http://127.0.0.1:8787"

// Client calls one Tessera server with one key, in one namespace. It is
// safe for concurrent use; InNamespace derives clients for others.
type Client struct {
	base      *url.URL
	key       string
	namespace string
	http      *http.Client
	retry     RetryPolicy
	userAgent string
	log       *slog.Logger
	// shared is shared with the clients InNamespace derives: one key's
	// counters and warnings, whatever namespace it calls.
	shared *shared
}

// shared is what a Client and the clients derived from it have in common.
type shared struct {
	rateLimited, retries atomic.Int64
	// polled and warned hold the namespace + queue pairs WaitClaim has
	// polled, and has warned of as unknown.
	polled, warned sync.Map
	// submitters coalesce keepers' submits, one per namespace; a server
	// found without the batch routes is sent single calls from then on.
	submitters                  sync.Map
	noBatchClaim, noBatchSubmit atomic.Bool
}

// Stats counts what a client met beside its answers. Clients derived by
// InNamespace share their parent's.
type Stats struct {
	// RateLimited counts the 429 answers received, retried or returned:
	// a steady rise means the key needs a higher --claim-rate or
	// --claim-concurrency on the server (or fewer workers).
	RateLimited int64
	// Retries counts tries sent again after a failed one, whatever the
	// cause (429, 503, a refused connection, a broken one).
	Retries int64
}

// Stats returns the client's counters so far.
func (c *Client) Stats() Stats {
	return Stats{RateLimited: c.shared.rateLimited.Load(), Retries: c.shared.retries.Load()}
}

// RetryPolicy says how requests are retried (see the package doc for
// which ones are).
type RetryPolicy struct {
	// Attempts is the most tries of one request, the first included.
	Attempts int
	// MinBackoff and MaxBackoff bound the exponential wait between tries
	// when the server gave no Retry-After.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a longer one (a
	// spent storage allowance resets at midnight) is returned as the error.
	MaxRetryAfter time.Duration
}

// DefaultRetry retries four times over about ten seconds.
var DefaultRetry = RetryPolicy{Attempts: 5, MinBackoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second, MaxRetryAfter: 30 * time.Second}

// Option configures a Client.
type Option func(*Client)

// WithKey sets the bearer key (tsk_…) sent with every request.
func WithKey(key string) Option { return func(c *Client) { c.key = key } }

// WithNamespace makes the client call namespace ns (default main).
func WithNamespace(ns string) Option { return func(c *Client) { c.namespace = ns } }

// WithHTTPClient sets the http.Client requests go through. It should have
// no overall Timeout shorter than the long-polls (30 s); contexts bound
// each call instead.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithRetry replaces DefaultRetry; RetryPolicy{Attempts: 1} never retries.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithLogger sets where the client says what it does unasked: each retry
// of a 429 at debug level, a claim on a queue that has never had a task
// at warn level (once per queue), and what Work does with each task.
// Without it the client logs nothing.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// New returns a client of the server at baseURL ("" is DefaultURL).
func New(baseURL string, opts ...Option) (*Client, error) {
	if baseURL == "" {
		baseURL = DefaultURL
	}
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{base: u, namespace: "main", http: http.DefaultClient, retry: DefaultRetry, userAgent: "tessera-go-client", shared: &shared{}}
	for _, o := range opts {
		o(c)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.retry.Attempts < 1 {
		c.retry.Attempts = 1
	}
	return c, nil
}

// InNamespace returns a client like c that calls namespace ns.
func (c *Client) InNamespace(ns string) *Client {
	d := *c
	d.namespace = ns
	return &d
}

// Namespace is the namespace the client calls.
func (c *Client) Namespace() string { return c.namespace }

// BaseURL is the server's base URL.
func (c *Client) BaseURL() string { return c.base.String() }

// request is one call of the API, described once and sent as many times
// as the retry policy allows.
type request struct {
	method string
	// path is below /v1 (and below /ns/{ns}/v1 outside main), unless
	// absolute is set: then it is the whole path (the public routes).
	path     string
	absolute bool
	// namespaced absolute paths get the /ns/{ns} prefix too.
	namespaced bool
	query      url.Values
	// body is sent as JSON; raw, when set, is sent as is instead.
	body        any
	raw         []byte
	contentType string
	header      http.Header
	// idempotencyKey, when set, is sent as Idempotency-Key on every try.
	idempotencyKey string
	// safe marks a request that may be repeated after it might have
	// reached the server: reads, heartbeats, and keyed writes.
	safe bool
	// accept are the statuses that are not errors (default: any 2xx).
	accept []int
	// stream, when set, receives a successful answer's body instead of
	// it being buffered.
	stream io.Writer
}

// reply is what a call answered.
type reply struct {
	status int
	header http.Header
	body   []byte
	// streamed counts the bytes copied to request.stream.
	streamed int64
}

// streamError is a failure while copying an answer to request.stream:
// bytes may have been written already, so the call is never retried.
type streamError struct{ err error }

func (e *streamError) Error() string { return "read answer: " + e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

// NewIdempotencyKey returns a fresh random Idempotency-Key.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "tc-" + hex.EncodeToString(b[:])
}

// keyed returns the caller's idempotency key, or a fresh one.
func keyed(given string) string {
	if given != "" {
		return given
	}
	return NewIdempotencyKey()
}

func (c *Client) url(r *request) string {
	p := r.path
	if !r.absolute {
		p = "/v1" + p
	}
	if (!r.absolute || r.namespaced) && c.namespace != "" && c.namespace != "main" {
		p = "/ns/" + url.PathEscape(c.namespace) + p
	}
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + p
	u.RawQuery = r.query.Encode()
	return u.String()
}

// do sends r, retrying as the policy and r.safe allow, and decodes a JSON
// answer into out (when out is not nil and there is a body).
func (c *Client) do(ctx context.Context, r *request, out any) (*reply, error) {
	var body []byte
	switch {
	case r.raw != nil:
		body = r.raw
	case r.body != nil:
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", r.method, r.path, err)
		}
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		rep, err := c.send(ctx, r, body)
		if err == nil {
			if out != nil && len(rep.body) > 0 {
				if err := json.Unmarshal(rep.body, out); err != nil {
					return rep, fmt.Errorf("%s %s: decode answer: %w", r.method, r.path, err)
				}
			}
			return rep, nil
		}
		lastErr = err
		limited := status(err) == http.StatusTooManyRequests
		if limited {
			c.shared.rateLimited.Add(1)
		}
		wait, retry := c.shouldRetry(r, err, attempt)
		if !retry {
			return rep, lastErr
		}
		c.shared.retries.Add(1)
		if limited {
			c.log.Debug("tessera: rate limited; retrying", "method", r.method, "path", r.path, "attempt", attempt, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return rep, errors.Join(ctx.Err(), lastErr)
		case <-t.C:
		}
	}
}

// shouldRetry decides whether a failed try is tried again, and after how
// long.
func (c *Client) shouldRetry(r *request, err error, attempt int) (time.Duration, bool) {
	if attempt >= c.retry.Attempts {
		return 0, false
	}
	backoff := c.retry.MinBackoff * time.Duration(1<<min(attempt-1, 16))
	backoff = min(backoff, c.retry.MaxBackoff)
	backoff += time.Duration(mrand.Int64N(int64(backoff/4) + 1)) // spread a fleet's retries
	var e *Error
	if errors.As(err, &e) {
		// 429 and 503 mean the server did not act: any request may repeat.
		if e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable {
			return 0, false
		}
		if e.RetryAfter > 0 {
			if e.RetryAfter > c.retry.MaxRetryAfter {
				return 0, false
			}
			return e.RetryAfter, true
		}
		return backoff, true
	}
	var se *streamError
	if errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false
	}
	// A connection that was never made carried nothing; one that broke
	// may have carried the request, so only safe requests repeat.
	if notSent(err) || r.safe {
		return backoff, true
	}
	return 0, false
}

// notSent reports a transport failure before the request could reach the
// server: the connection was refused or could not be dialled.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func (c *Client) send(ctx context.Context, r *request, body []byte) (*reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.url(r), rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", cmp.Or(r.contentType, "application/json"))
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if r.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}
	if t := TraceFrom(ctx); t != nil {
		req.Header.Set("traceparent", t.Traceparent)
		if t.Tracestate != "" {
			req.Header.Set("tracestate", t.Tracestate)
		}
	}
	req.Header.Set("User-Agent", c.userAgent)
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if r.stream != nil && accepted(r.accept, res.StatusCode) {
		n, err := io.Copy(r.stream, res.Body)
		rep := &reply{status: res.StatusCode, header: res.Header, streamed: n}
		if err != nil {
			return rep, &streamError{err}
		}
		return rep, nil
	}
	// Bodies are bounded by the API; 64 MiB guards against a wrong server.
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", r.method, r.path, err)
	}
	rep := &reply{status: res.StatusCode, header: res.Header, body: b}
	if accepted(r.accept, res.StatusCode) {
		return rep, nil
	}
	return rep, apiError(res, b)
}

func accepted(statuses []int, status int) bool {
	if statuses == nil {
		return status >= 200 && status < 300
	}
	for _, s := range statuses {
		if s == status {
			return true
		}
	}
	return false
}

// apiError reads the error body of a failed answer.
func apiError(res *http.Response, b []byte) *Error {
	var body struct {
		Error struct {
			Code    string       `json:"code"`
			Message string       `json:"message"`
			Details ErrorDetails `json:"details"`
		} `json:"error"`
	}
	e := &Error{Status: res.StatusCode, RetryAfter: retryAfter(res.Header)}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Details = body.Error.Code, body.Error.Message, body.Error.Details
	} else {
		// Not the API's answer (a proxy, a wrong URL): say what came back.
		e.Code = CodeInternal
		e.Message = fmt.Sprintf("unexpected answer %s", strings.TrimSpace(string(b[:min(len(b), 200)])))
		if res.StatusCode == http.StatusServiceUnavailable {
			e.Code = CodeUnavailable
		}
	}
	if e.Message == "" {
		// An error with only a code still tells a person what happened.
		e.Message = cmp.Or(http.StatusText(res.StatusCode), "no message")
	}
	return e
}

// retryAfter reads a Retry-After header given in seconds (the API's form).
func retryAfter(h http.Header) time.Duration {
	s, err := strconv.ParseFloat(h.Get("Retry-After"), 64)
	if err != nil || s < 0 || math.IsInf(s, 0) || s > 1e6 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
