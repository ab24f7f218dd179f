package client

import (
	"context"
	"net/http"
)

// The public state (no key needed on main; under another namespace the
// key needs read there) and the discovery documents.

// Healthz is the liveness check (GET /healthz).
func (c *Client) Healthz(ctx context.Context) (*Healthz, error) {
	var out Healthz
	_, err := c.do(ctx, &request{method: "GET", path: "/healthz", absolute: true, namespaced: true, safe: true}, &out)
	return result(&out, err)
}

// Health returns the public health snapshot (GET /v1/health).
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var out Health
	_, err := c.do(ctx, &request{method: "GET", path: "/health", safe: true}, &out)
	return result(&out, err)
}

// Board returns the board as JSON (GET /board).
func (c *Client) Board(ctx context.Context) (*Board, error) {
	var out Board
	_, err := c.do(ctx, &request{method: "GET", path: "/board", absolute: true, namespaced: true, safe: true}, &out)
	return result(&out, err)
}

// Activity returns public events of the last 24 h, newest first
// (GET /v1/public/activity).
func (c *Client) Activity(ctx context.Context, p Page) (*ActivityPage, error) {
	var out ActivityPage
	_, err := c.do(ctx, &request{method: "GET", path: "/public/activity", query: pageQuery(p), safe: true}, &out)
	return result(&out, err)
}

// Document returns a discovery document or the metrics as bytes: "/",
// "/connect", "/connect.json", "/v1/openapi.json", "/llms.txt",
// "/llms-full.txt", "/robots.txt", "/favicon.svg",
// "/.well-known/agent-card.json" or "/metrics" (admin key unless the
// server serves it publicly).
func (c *Client) Document(ctx context.Context, path string) ([]byte, error) {
	rep, err := c.do(ctx, &request{method: "GET", path: path, absolute: true, safe: true,
		header: http.Header{"Accept": {"*/*"}}}, nil)
	if err != nil {
		return nil, err
	}
	return rep.body, nil
}
