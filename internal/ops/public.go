package ops

import (
	"context"
	"errors"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// publicOnly says why the public state has no tools.
const publicOnly = "public state for browsers and monitors, without a key; MCP clients read counts"

// healthz is the liveness answer.
type healthz struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
}

// publicOps are the public-state routes of SPEC §3.2: absolute paths, and
// no key needed on the main namespace.
var publicOps = []*Op{
	op(Op{Name: core.ActHealthz, Summary: "Liveness, from the health snapshot; 503 when it cannot be built", Public: true, Only: publicOnly,
		HTTP: &Route{Method: "GET", Path: "/healthz", Namespaced: true}},
		func(ctx context.Context, c *Call, _ *none) (*healthz, error) {
			h, err := c.core.Health(ctx, c.Actor, c.NS)
			if err != nil {
				return nil, publicFault(err)
			}
			return &healthz{Status: h.Status, Time: h.Time}, nil
		}),
	op(Op{Name: core.ActHealth, Summary: "Public tasks by queue and state, leases live and expired, oldest ready age", Public: true, Only: publicOnly,
		HTTP: &Route{Method: "GET", Path: "/v1/health", Namespaced: true}},
		func(ctx context.Context, c *Call, _ *none) (*core.Health, error) {
			h, err := c.core.Health(ctx, c.Actor, c.NS)
			return h, publicFault(err)
		}),
	op(Op{Name: core.ActBoard, Summary: "Public tasks by state and public record heads: HTML for browsers, JSON for Accept: application/json", Public: true, Only: publicOnly,
		HTTP: &Route{Method: "GET", Path: "/board", Namespaced: true, HTML: true}},
		func(ctx context.Context, c *Call, _ *none) (*core.Board, error) {
			b, err := c.core.Board(ctx, c.Actor, c.NS)
			return b, publicFault(err)
		}),
	op(Op{Name: core.ActActivity, Summary: "Public events of the last 24 h, newest first, redacted", Public: true, Only: publicOnly,
		HTTP: &Route{Method: "GET", Path: "/v1/public/activity", Namespaced: true}},
		func(ctx context.Context, c *Call, in *page) (*core.ActivityPage, error) {
			p, err := c.core.Activity(ctx, c.Actor, c.NS, in.Cursor, in.limit())
			return p, publicFault(err)
		}),
}

// publicFault keeps the API's own errors (a bad key, a missing grant, a
// bad cursor, a refused audit write) and storage's own unavailability
// with its hint, and turns any other fault into 503
// unavailable: the public state cannot be read (SPEC §3.2).
func publicFault(err error) error {
	var e *tessera.Error
	if err == nil || errors.As(err, &e) || store.IsUnavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errors.Join(tessera.Errorf(tessera.CodeUnavailable, "the public state cannot be read right now"), err)
}
