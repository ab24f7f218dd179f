package client

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Claim asks for the next ready task of a queue (POST /v1/claims), waiting
// up to req.WaitSeconds for one. No task is (nil, *Empty, nil): the
// server's advice on when to ask again, and whether the queue has never
// had a task at all.
//
// A claim is not repeated after a connection broke mid-request: the server
// may have granted a lease whose answer was lost, and that task then comes
// back when the lease lapses.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (*Claim, *Empty, error) {
	var out Claim
	rep, err := c.do(ctx, &request{method: "POST", path: "/claims", body: req,
		accept: []int{http.StatusOK, http.StatusNoContent}}, &out)
	if err != nil {
		return nil, nil, err
	}
	if rep.status == http.StatusNoContent {
		e := &Empty{RetryAfter: retryAfter(rep.header), QueueUnknown: rep.header.Get(queueKnownHeader) == "false"}
		if v := rep.header.Get(uncoveredRequiresHeader); v != "" {
			e.UncoveredRequires = strings.Split(v, ",")
		}
		return nil, e, nil
	}
	return &out, nil, nil
}

// Headers of an empty claim's answer: queueKnownHeader is false when the
// queue has never had a task in the namespace; uncoveredRequiresHeader
// lists, comma-separated, what a ready task requires that the claim's
// capabilities lack.
const (
	queueKnownHeader        = "Tessera-Queue-Known"
	uncoveredRequiresHeader = "Tessera-Uncovered-Requires"
)

// Empty is a claim's answer when no task was ready.
type Empty struct {
	// RetryAfter is the server's advice on when to poll again (it grows
	// while the queue stays empty; long-poll is the better way to wait).
	RetryAfter time.Duration
	// QueueUnknown says the queue has never had a task in the namespace:
	// most often a typo in the queue's or the namespace's name, though a
	// worker may also start before any producer. Servers that do not tell
	// leave it false.
	QueueUnknown bool
	// UncoveredRequires is what a task ready in the queue requires that
	// the claim's Capabilities lack: there is work, but not for this
	// claimant. Servers that do not tell leave it nil.
	UncoveredRequires []string
}

// WaitClaim long-polls until a task of the queue is granted or ctx ends.
// Each poll waits req.WaitSeconds, by default the longest the server
// allows (20 s), except the client's first poll of the queue, which does
// not wait; between polls it follows the server's advice only when a poll
// answered early.
//
// It is cancellable at any point, in the middle of a long-poll too: when
// ctx ends it returns at once with an error that errors.Is ctx's error
// (context.Canceled or context.DeadlineExceeded). (A lease the server
// granted at that very instant is lost with its answer; its task comes
// back when the lease lapses, like any claim cut off.) Polling a
// queue that has never had a task is logged once per queue, at warn level,
// to the client's logger (WithLogger); so are ready tasks whose requires
// req.Capabilities do not cover, once per set of requires.
func (c *Client) WaitClaim(ctx context.Context, req ClaimRequest) (*Claim, error) {
	claims, err := c.waitClaims(ctx, req, func(req ClaimRequest) ([]Claim, *Empty, error) {
		cl, empty, err := c.Claim(ctx, req)
		if cl != nil {
			return []Claim{*cl}, nil, err
		}
		return nil, empty, err
	})
	if len(claims) == 0 {
		return nil, err
	}
	return &claims[0], err
}

// WaitClaimN is WaitClaim for up to max tasks (ClaimN): it answers as
// soon as at least one is granted.
func (c *Client) WaitClaimN(ctx context.Context, req ClaimRequest, max int) ([]Claim, error) {
	return c.waitClaims(ctx, req, func(req ClaimRequest) ([]Claim, *Empty, error) { return c.ClaimN(ctx, req, max) })
}

// waitClaims is WaitClaim's loop around one claim call.
func (c *Client) waitClaims(ctx context.Context, req ClaimRequest, claim func(ClaimRequest) ([]Claim, *Empty, error)) ([]Claim, error) {
	wait := cmp.Or(req.WaitSeconds, MaxClaimWait)
	req.WaitSeconds = wait
	// The first poll of a queue asks without waiting, so a queue that
	// has never had a task is warned of at once, not after a long-poll.
	name := cmp.Or(req.Queue, "default")
	queue := c.namespace + "\x00" + name
	if _, polled := c.shared.polled.Load(queue); !polled {
		req.WaitSeconds = 0
	}
	for {
		start := time.Now()
		claims, empty, err := claim(req)
		if err != nil || len(claims) > 0 {
			return claims, err
		}
		c.shared.polled.Store(queue, true)
		if empty.QueueUnknown {
			if _, warned := c.shared.warned.LoadOrStore(queue, true); !warned {
				c.log.Warn(fmt.Sprintf("tessera: queue %q in namespace %q has never had a task; check the queue and namespace names (waiting for one meanwhile)", name, c.namespace))
			}
		}
		if len(empty.UncoveredRequires) > 0 {
			set := queue + "\x00" + strings.Join(empty.UncoveredRequires, " ")
			if _, warned := c.shared.warned.LoadOrStore(set, true); !warned {
				c.log.Warn(fmt.Sprintf("tessera: queue %q in namespace %q has ready tasks that require %s, which this worker's capabilities %v do not cover (waiting for work it can take meanwhile)",
					name, c.namespace, strings.Join(empty.UncoveredRequires, ", "), req.Capabilities))
			}
		}
		if req.WaitSeconds == 0 {
			req.WaitSeconds = wait
			continue
		}
		// A poll that came back early (the server draining) would
		// otherwise spin: wait out the advice, at most one long-poll's
		// length.
		if time.Since(start) < time.Duration(req.WaitSeconds)*time.Second/2 {
			t := time.NewTimer(min(empty.RetryAfter, time.Duration(req.WaitSeconds)*time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// ClaimN asks for up to max (1–100) ready tasks of a queue in one call
// (POST /v1/claims/batch), each granted with a lease of its own, waiting
// up to req.WaitSeconds for the first: it answers as soon as one is ready
// and never waits to fill max. None is (nil, *Empty, nil). Like Claim it
// is not repeated after a connection broke mid-request.
func (c *Client) ClaimN(ctx context.Context, req ClaimRequest, max int) ([]Claim, *Empty, error) {
	var out struct {
		Claims            []Claim  `json:"claims"`
		RetryAfter        int      `json:"retry_after"`
		QueueKnown        *bool    `json:"queue_known"`
		UncoveredRequires []string `json:"uncovered_requires"`
	}
	body := struct {
		ClaimRequest
		Max int `json:"max"`
	}{req, max}
	if _, err := c.do(ctx, &request{method: "POST", path: "/claims/batch", body: body}, &out); err != nil {
		return nil, nil, err
	}
	if len(out.Claims) == 0 {
		return nil, &Empty{RetryAfter: time.Duration(out.RetryAfter) * time.Second, QueueUnknown: out.QueueKnown != nil && !*out.QueueKnown,
			UncoveredRequires: out.UncoveredRequires}, nil
	}
	return out.Claims, nil, nil
}

// MaxClaimBatch is the most tasks ClaimN may ask for, and the most items
// of a SubmitBatch.
const MaxClaimBatch = 100

// MaxClaimWait is the longest long-poll a claim may ask for, in seconds.
const MaxClaimWait = 20

// Heartbeat extends a lease and learns whether a cancel was requested
// (POST /v1/claims/{task}/heartbeat). Repeating one is harmless, so it is
// retried after a broken connection too.
func (c *Client) Heartbeat(ctx context.Context, taskID string, req HeartbeatRequest) (*Heartbeat, error) {
	var out Heartbeat
	_, err := c.do(ctx, &request{method: "POST", path: "/claims/" + url.PathEscape(taskID) + "/heartbeat", body: req, safe: true}, &out)
	return result(&out, err)
}

// Submit ends a run with its outcome (POST /v1/claims/{task}/submit),
// always with an Idempotency-Key.
func (c *Client) Submit(ctx context.Context, taskID string, req SubmitRequest) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "POST", path: "/claims/" + url.PathEscape(taskID) + "/submit", body: req,
		idempotencyKey: keyed(req.IdempotencyKey), safe: true}, &out)
	return result(&out, err)
}

// SubmitBatch ends up to 100 runs in one call (POST /v1/claims/submit),
// always with an Idempotency-Key, so it is repeated after a broken
// connection without ending a run twice. Each item is fenced by its own
// lease token: a lost lease or a missing task is that item's Err, and the
// others stand. The results are in the items' order.
func (c *Client) SubmitBatch(ctx context.Context, req SubmitBatchRequest) ([]SubmitResult, error) {
	var out struct {
		Results []SubmitResult `json:"results"`
	}
	_, err := c.do(ctx, &request{method: "POST", path: "/claims/submit", body: req,
		idempotencyKey: keyed(req.IdempotencyKey), safe: true}, &out)
	if err != nil {
		return nil, err
	}
	for i := range out.Results {
		if e := out.Results[i].Error; e != nil {
			out.Results[i].Err = &Error{Status: e.Status, Code: e.Code, Message: e.Message}
		}
	}
	return out.Results, nil
}

// Release gives a task back without using an attempt
// (POST /v1/claims/{task}/release).
func (c *Client) Release(ctx context.Context, taskID, leaseToken string) (*Task, error) {
	return c.ReleaseWith(ctx, taskID, ReleaseRequest{LeaseToken: leaseToken})
}

// ReleaseWith is Release with the request's other fields: a cooldown of
// the task's group.
func (c *Client) ReleaseWith(ctx context.Context, taskID string, req ReleaseRequest) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "POST", path: "/claims/" + url.PathEscape(taskID) + "/release", body: req}, &out)
	return result(&out, err)
}

// OpenGates parks a leased task on gates (POST /v1/claims/{task}/gate):
// the run ends without using an attempt, the lease is over, and the task
// is gated until a person answers every gate (AnswerGate) or one times
// out; the claim that follows carries the answers (Claim.GateAnswers) and
// req.Checkpoint. A task whose cancel was requested ends canceled instead.
// Like Release it is not repeated after a broken connection: the first
// try may have ended the lease, and a repeat would be refused as
// lease_lost.
func (c *Client) OpenGates(ctx context.Context, taskID string, req GateRequest) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "POST", path: "/claims/" + url.PathEscape(taskID) + "/gate", body: req}, &out)
	return result(&out, err)
}

// ClaimEvents long-polls a held task's events after sequence since, for up
// to wait (0–30 s) (GET /v1/claims/{task}/events).
func (c *Client) ClaimEvents(ctx context.Context, taskID string, since int64, wait time.Duration) (*ClaimEvents, error) {
	q := url.Values{}
	q.Set("since", strconv.FormatInt(since, 10))
	q.Set("wait", strconv.Itoa(int(wait/time.Second)))
	var out ClaimEvents
	_, err := c.do(ctx, &request{method: "GET", path: "/claims/" + url.PathEscape(taskID) + "/events", query: q, safe: true}, &out)
	return result(&out, err)
}
