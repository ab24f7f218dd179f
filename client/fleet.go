package client

import (
	"context"
	"net/url"
	"time"
)

// Claims that fit a fleet: a task may require capabilities
// (EnqueueRequest.Requires) and belong to a group (EnqueueRequest.Group);
// a claim shows its claimant's capabilities (ClaimRequest.Capabilities,
// WorkOptions.Capabilities). A queue's groups may be capped and
// rate-limited, and a submit or release may cool its task's group down
// (SubmitRequest.CooldownSeconds, ReleaseRequest.CooldownSeconds).

// Rate is a token bucket: PerSecond tokens a second (0–100,000; 0 is no
// limit), at most Burst saved up (0: PerSecond rounded up).
type Rate struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
}

// QueueSettings are a queue's fleet settings. Namespace and Queue are
// the server's answer; SetQueueSettings sends only GroupMaxRunning and
// Rate.
type QueueSettings struct {
	Namespace string `json:"namespace,omitempty"`
	Queue     string `json:"queue,omitempty"`
	// GroupMaxRunning caps each group's live leases (0: no cap), unless
	// the group sets its own (GroupSettings.MaxRunning).
	GroupMaxRunning int `json:"group_max_running"`
	// Rate limits the queue's grants; nil is no limit.
	Rate *Rate `json:"rate,omitempty"`
}

// GroupSettings are one group's settings in a queue, set whole by
// SetGroupSettings: what is nil is none.
type GroupSettings struct {
	// Group is the group ("" for the queue's tasks without one).
	Group string `json:"group"`
	// MaxRunning caps the group's live leases over the queue's
	// GroupMaxRunning (nil: the queue's; 0: no cap).
	MaxRunning *int `json:"max_running,omitempty"`
	// Rate limits the group's grants; nil is no limit.
	Rate *Rate `json:"rate,omitempty"`
	// CooldownUntil is when the group's ready tasks may be granted again
	// (nil or past: now).
	CooldownUntil *time.Time `json:"cooldown_until,omitempty"`
}

// GroupState is a group as the fleet view shows it: its settings, its
// live leases, its last grant.
type GroupState struct {
	GroupSettings
	// Running is the group's live leases (counted up to its cap, or 500
	// without one).
	Running       int        `json:"running"`
	LastGrantedAt *time.Time `json:"last_granted_at,omitempty"`
}

// LaneState is a lane: a queue's tasks of one group and one set of
// requires.
type LaneState struct {
	Group    string   `json:"group"`
	Requires []string `json:"requires"`
	// Ready counts the lane's ready tasks, scheduled ones included.
	Ready                 int      `json:"ready"`
	OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
	// Unmatched says no claimant that could take the lane's tasks has
	// been seen on the queue for UnmatchedSeconds (5 minutes or more).
	Unmatched        bool     `json:"unmatched"`
	UnmatchedSeconds *float64 `json:"unmatched_seconds,omitempty"`
}

// Claimant is a capability set seen claiming on a queue, and when last.
type Claimant struct {
	Capabilities []string  `json:"capabilities"`
	SeenAt       time.Time `json:"seen_at"`
}

// Fleet is a queue's fleet view (GET /v1/queues/{queue}/fleet).
type Fleet struct {
	QueueSettings
	Time      time.Time    `json:"time"`
	Groups    []GroupState `json:"groups"`
	Lanes     []LaneState  `json:"lanes"`
	Claimants []Claimant   `json:"claimants"`
}

// QueueFleet reads a queue's fleet view: its settings, its groups, its
// lanes (ready tasks by group and requires, and which no claimant seen
// lately could take), and the capability sets seen claiming on it.
func (c *Client) QueueFleet(ctx context.Context, queue string) (*Fleet, error) {
	var out Fleet
	_, err := c.do(ctx, &request{method: "GET", path: "/queues/" + url.PathEscape(queue) + "/fleet", safe: true}, &out)
	return result(&out, err)
}

// SetQueueSettings replaces a queue's fleet settings — GroupMaxRunning
// and Rate; a new rate starts with a full bucket (PUT
// /v1/queues/{queue}/settings). A claim the rate holds back gets nothing,
// with Empty.RetryAfter saying when the next token is there.
func (c *Client) SetQueueSettings(ctx context.Context, queue string, s QueueSettings) (*QueueSettings, error) {
	body := struct {
		GroupMaxRunning int   `json:"group_max_running,omitempty"`
		Rate            *Rate `json:"rate,omitempty"`
	}{s.GroupMaxRunning, s.Rate}
	var out QueueSettings
	_, err := c.do(ctx, &request{method: "PUT", path: "/queues/" + url.PathEscape(queue) + "/settings", body: body, safe: true}, &out)
	return result(&out, err)
}

// SetGroupSettings replaces one group's settings in a queue — its cap,
// its rate, its cooldown (PUT /v1/queues/{queue}/groups) — and returns
// the group as it stands.
func (c *Client) SetGroupSettings(ctx context.Context, queue string, s GroupSettings) (*GroupState, error) {
	var out GroupState
	_, err := c.do(ctx, &request{method: "PUT", path: "/queues/" + url.PathEscape(queue) + "/groups", body: s, safe: true}, &out)
	return result(&out, err)
}
