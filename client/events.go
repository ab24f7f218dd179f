package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Event is one event of a namespace's live stream (GET /v1/events): what
// happened (Kind, and the Action behind it), to which task, queue, record
// or blob, and the state it left the task in.
type Event struct {
	// ID orders the namespace's events; Events resumes after the last one
	// it yielded when it reconnects.
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Action    string    `json:"action"`
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	// Target is a task id, bucket/key of a record, sha256:<hex> of a blob,
	// or a queue's name.
	Target string `json:"target"`
	TaskID string `json:"task_id,omitempty"`
	Queue  string `json:"queue,omitempty"`
	State  string `json:"state,omitempty"`
	RunID  string `json:"run_id,omitempty"`
	Title  string `json:"title,omitempty"`
	// By is the acting principal's id (absent on main's public stream).
	By string `json:"by,omitempty"`
	// Gap, on an event of Kind KindGap, says events were missed: what
	// happened before it is to be read again (ListTasks).
	Gap *Gap `json:"-"`
}

// Gap says a stream missed events: the cursor it resumed from is older
// than what the server keeps (24 h).
type Gap struct {
	After  string `json:"after"`
	Reason string `json:"reason"`
}

// Event kinds (Event.Kind).
const (
	KindEnqueued        = "task.enqueued"
	KindClaimed         = "task.claimed"
	KindHeartbeat       = "task.heartbeat"
	KindSucceeded       = "task.succeeded"
	KindFailed          = "task.failed"
	KindDead            = "task.dead"
	KindCanceled        = "task.canceled"
	KindCancelRequested = "task.cancel_requested"
	KindReleased        = "task.released"
	KindPaused          = "task.paused"
	KindResumed         = "task.resumed"
	KindRetried         = "task.retried"
	KindGated           = "task.gated"
	KindGateAnswered    = "task.gate_answered"
	KindGateTimedOut    = "task.gate_timed_out"
	KindQueuePaused     = "queue.paused"
	KindQueueResumed    = "queue.resumed"
	KindQueuePurged     = "queue.purged"
	KindRecordWritten   = "record.written"
	KindBlobStored      = "blob.stored"
	// KindGap is no change: events were missed (Event.Gap).
	KindGap = "gap"
)

// EventFilter selects what Events follows.
type EventFilter struct {
	// Queue and Task, when set, keep the events of that queue, or about
	// (or written under the leases of) that task.
	Queue, Task string
	// After resumes after this event id; "" starts now.
	After string
}

// maxEventLine bounds one line of the stream: an event is a few hundred
// bytes, its title at most 200.
const maxEventLine = 1 << 20

// seenWindow is how many event ids Events remembers to drop the repeats a
// resumed stream may send (on PostgreSQL the server reads a couple of
// seconds back again, so as not to miss late commits).
const seenWindow = 4096

// Events follows the namespace's events (GET /v1/events) until ctx ends,
// yielding each once, in order. When the connection breaks or the server
// ends the stream it connects again, after the client's backoff, resuming
// with Last-Event-ID after the last event yielded: nothing is lost within
// the 24 h the server keeps, and a stream resumed later yields an event of
// KindGap first. It yields an error and stops on an answer no retry can
// change (a bad key, a missing grant, a bad filter); ctx's end stops it
// without one.
//
//	for ev, err := range c.Events(ctx, client.EventFilter{Queue: "build"}) {
//		if err != nil { return err }
//		fmt.Println(ev.Kind, ev.TaskID, ev.State)
//	}
func (c *Client) Events(ctx context.Context, f EventFilter) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		last := f.After
		seen := newIDWindow(seenWindow)
		for attempt := 1; ; attempt++ {
			got, err := c.followEvents(ctx, f, last, func(ev Event) bool {
				if ev.ID != "" {
					if seen.has(ev.ID) {
						return true
					}
					seen.add(ev.ID)
					last = ev.ID
				}
				return yield(ev, nil)
			})
			if errors.Is(err, errStopped) || ctx.Err() != nil {
				return
			}
			if got {
				attempt = 1 // it streamed: a break now is a fresh failure
			}
			err = cmpErr(err)
			wait, retry := c.shouldRetry(&request{safe: true}, err, attempt)
			if !retry {
				yield(Event{}, err)
				return
			}
			c.shared.retries.Add(1)
			c.log.Debug("tessera: event stream broke; resuming", "after", last, "in", wait, "err", err)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// errStopped is the consumer of Events having stopped.
var errStopped = errors.New("stopped")

// cmpErr is err, or for a stream the server ended cleanly, an error that
// retries.
func cmpErr(err error) error {
	if err == nil {
		return errEnded
	}
	return err
}

var errEnded = &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the server ended the event stream"}

// followEvents makes one connection of a stream and hands each event to
// each until the stream ends; got says whether any event came.
func (c *Client) followEvents(ctx context.Context, f EventFilter, after string, each func(Event) bool) (got bool, err error) {
	q := url.Values{}
	set(q, "queue", f.Queue)
	set(q, "task", f.Task)
	req, err := http.NewRequestWithContext(ctx, "GET", c.url(&request{path: "/events", query: q}), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", c.userAgent)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := readLimited(res)
		return false, apiError(res, b)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEventLine)
	var id, kind string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if data.Len() == 0 {
				id, kind = "", ""
				continue // a comment's end, a keep-alive
			}
			ev, err := decodeEvent(id, kind, data.Bytes())
			data.Reset()
			id, kind = "", ""
			if err != nil {
				return got, err
			}
			got = true
			if !each(ev) {
				return got, errStopped
			}
		case field == "":
			// A comment.
		case field == "id":
			id = value
		case field == "event":
			kind = value
		case field == "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
	return got, sc.Err()
}

// decodeEvent reads one message of the stream.
func decodeEvent(id, kind string, data []byte) (Event, error) {
	switch kind {
	case KindGap:
		var g Gap
		if err := json.Unmarshal(data, &g); err != nil {
			return Event{}, fmt.Errorf("event stream: a gap of %q: %w", data, err)
		}
		return Event{ID: id, Kind: KindGap, Gap: &g}, nil
	case "error":
		// The server ended the stream with the error no status could
		// carry any more (a key revoked while it streamed).
		var body struct {
			Status int `json:"status"`
			Error  struct {
				Code    string       `json:"code"`
				Message string       `json:"message"`
				Details ErrorDetails `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &body); err != nil {
			return Event{}, fmt.Errorf("event stream: an error of %q: %w", data, err)
		}
		return Event{}, &Error{Status: body.Status, Code: body.Error.Code, Message: body.Error.Message, Details: body.Error.Details}
	}
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return Event{}, fmt.Errorf("event stream: an event of %q: %w", data, err)
	}
	return ev, nil
}

// readLimited reads an error answer's body, bounded.
func readLimited(res *http.Response) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(nil, res.Body, 1<<20))
	return b.Bytes(), err
}

// idWindow remembers the last n ids added.
type idWindow struct {
	ids  []string
	next int
	set  map[string]bool
}

func newIDWindow(n int) *idWindow { return &idWindow{ids: make([]string, n), set: map[string]bool{}} }

func (w *idWindow) has(id string) bool { return w.set[id] }

func (w *idWindow) add(id string) {
	if old := w.ids[w.next]; old != "" {
		delete(w.set, old)
	}
	w.ids[w.next] = id
	w.set[id] = true
	w.next = (w.next + 1) % len(w.ids)
}
