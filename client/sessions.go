package client

import (
	"context"
	"time"
)

// Session is an anonymous demo session: a key for a namespace of its own
// with practice tasks, for trying Tessera without an operator.
type Session struct {
	// Key is the session's bearer key, shown only in this answer.
	Key       string    `json:"key"`
	KeyID     string    `json:"key_id"`
	Principal string    `json:"principal_id"`
	Namespace string    `json:"namespace"`
	ExpiresAt time.Time `json:"expires_at"`
	Limits    struct {
		RequestsLeft int `json:"requests_left"`
		ByteLimit    int `json:"byte_limit"`
	} `json:"limits"`
	NextSteps []struct {
		Title string `json:"title"`
		Curl  string `json:"curl,omitempty"`
		MCP   *struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"mcp,omitempty"`
	} `json:"next_steps"`
}

// StartSession mints an anonymous demo session (POST /v1/sessions); it
// needs no key. A session is not idempotent, so a call that may have
// reached the server is not repeated. Use the answer with
// New(url, WithKey(s.Key), WithNamespace(s.Namespace)).
func (c *Client) StartSession(ctx context.Context) (*Session, error) {
	var out Session
	_, err := c.do(ctx, &request{method: "POST", path: "/v1/sessions", absolute: true}, &out)
	return result(&out, err)
}
