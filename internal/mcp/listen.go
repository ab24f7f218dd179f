package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// subscriptions/listen for the tasks extension: a stream of
// notifications/tasks, each the whole task as tasks/get answers it, for
// the handles the caller made. The changes come from the namespace's event
// stream (core.Stream), which hears every node's commits, so a
// subscription on one node follows work done on any. The stream ends when
// every task it follows has ended — nothing more can come — or when the
// client goes, the key stops being good, or the node stops.

// MaxListenTasks bounds the handles one subscription follows.
const MaxListenTasks = 32

const (
	metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	listenMethod       = "subscriptions/listen"
)

// StreamOut is where a subscription writes: the transport's event stream.
type StreamOut interface {
	// Open sends the stream's headers.
	Open() error
	// Message sends one JSON-RPC message at once.
	Message(v any) error
	// KeepAlive sends what keeps an idle connection open.
	KeepAlive() error
}

// listen answers a subscriptions/listen: an error, or the stream.
func (e *Endpoint) listen(ctx context.Context, c *call) (*Answer, *Error) {
	if err := e.checkLane(c); err != nil {
		return nil, err
	}
	if err := checkStandardHeaders(c); err != nil {
		return nil, err
	}
	if !c.modern {
		return nil, rpcErr(CodeMethodNotFound, 0, "%s is a %s method", listenMethod, Version20260728)
	}
	var p struct {
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	}
	if c.msg.Params == nil || json.Unmarshal(c.msg.Params, &p) != nil {
		return nil, rpcErr(CodeInvalidParams, 0, "%s needs params.notifications, an object", listenMethod)
	}
	if len(p.Notifications.TaskIDs) > 0 && !c.tasks {
		return nil, missingTasksCapability()
	}
	if len(p.Notifications.TaskIDs) > MaxListenTasks {
		return nil, rpcErr(CodeInvalidParams, 0, "a subscription follows at most %d tasks", MaxListenTasks)
	}
	// Only the caller's own handles are honoured; the acknowledgement
	// names them, and the others are left out as the extension has it.
	follow := map[string]map[string]bool{} // namespace → task ids
	honoured := []string{}
	for _, h := range p.Notifications.TaskIDs {
		t, err := e.ownTask(ctx, c, h)
		if err != nil {
			if err.Code == CodeInvalidParams {
				continue
			}
			return nil, err
		}
		if follow[t.Namespace] == nil {
			follow[t.Namespace] = map[string]bool{}
		}
		if !follow[t.Namespace][t.ID] {
			follow[t.Namespace][t.ID] = true
			honoured = append(honoured, h)
		}
	}
	l := &listener{e: e, c: c, follow: follow, honoured: honoured, sent: map[string]string{}, ended: map[string]bool{}}
	refuse := func(err error) *Answer {
		f := ops.Fault(err)
		status := ops.Status(f.Code)
		code := CodeInvalidParams
		if status >= http.StatusInternalServerError {
			code = CodeInternalError
		}
		return single(errorResponse(c.msg.ID, rpcErr(code, status, "%s", f.Message)), status)
	}
	return &Answer{Status: http.StatusOK, Stream: l.run, refuse: refuse}, nil
}

// listener is one subscription's state while it streams.
type listener struct {
	e        *Endpoint
	c        *call
	follow   map[string]map[string]bool
	honoured []string

	mu     sync.Mutex
	out    StreamOut
	opened bool
	// sent is the status and update time last sent of each task, so a
	// change seen twice (the first read and its event) is sent once.
	sent  map[string]string
	ended map[string]bool
}

// errFollowed ends the streams once every task followed has ended.
var errFollowed = errors.New("every task followed has ended")

func (l *listener) run(ctx context.Context, out StreamOut) error {
	l.out = out
	if len(l.honoured) == 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.open(ctx) // acknowledged, and nothing to follow
	}
	// One stream per namespace; the first to end ends the others.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(l.follow))
	for ns, tasks := range l.follow {
		params := core.StreamParams{}
		if len(tasks) == 1 {
			for id := range tasks {
				params.TaskID = id
			}
		}
		wg.Go(func() {
			errs <- l.e.exec.Core().Stream(ctx, l.c.actor, ns, params, &listenSink{l: l, ctx: ctx, ns: ns})
			cancel()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, errFollowed) && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return nil
}

// open sends the headers, the acknowledgement and every followed task as
// it is now, once: the first of the namespaces' streams to be admitted
// does it. The streams' cursors were set before they were admitted, so a
// change after this read comes as an event.
func (l *listener) open(ctx context.Context) error {
	if l.opened {
		return nil
	}
	l.opened = true
	if err := l.out.Open(); err != nil {
		return err
	}
	ack := map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
		"params": map[string]any{"notifications": map[string]any{"taskIds": l.honoured}, "_meta": l.meta()}}
	if err := l.out.Message(ack); err != nil {
		return err
	}
	for ns, tasks := range l.follow {
		for id := range tasks {
			if err := l.notify(ctx, ns, id); err != nil {
				return err
			}
		}
	}
	return l.doneIfAllEnded()
}

func (l *listener) meta() map[string]any {
	return map[string]any{metaSubscriptionID: l.c.msg.ID}
}

// notify reads a followed task and sends it, if it changed since last
// sent.
func (l *listener) notify(ctx context.Context, ns, id string) error {
	t, err := l.e.exec.Core().GetTask(ctx, l.c.actor, ns, id)
	if err != nil {
		if tessera.ErrorCode(err) == tessera.CodeNotFound {
			l.ended[id] = true // deleted by retention: nothing more can come
			return nil
		}
		return err
	}
	view := l.e.taskView(l.c, t, "")
	view.resultMeta = resultMeta{}
	seen := view.Status + " " + view.LastUpdatedAt + " " + view.StatusMessage
	if l.sent[id] == seen {
		return nil
	}
	l.sent[id] = seen
	if tessera.Terminal(t.State) {
		l.ended[id] = true
	}
	b, err := json.Marshal(view)
	if err != nil {
		return err
	}
	var params map[string]any
	if err := json.Unmarshal(b, &params); err != nil {
		return err
	}
	params["_meta"] = l.meta()
	return l.out.Message(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
}

func (l *listener) doneIfAllEnded() error {
	for _, tasks := range l.follow {
		for id := range tasks {
			if !l.ended[id] {
				return nil
			}
		}
	}
	return errFollowed
}

// listenSink is one namespace's event stream, as the subscription reads
// it.
type listenSink struct {
	l   *listener
	ctx context.Context
	ns  string
}

func (s *listenSink) Open() error {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.l.open(s.ctx)
}

func (s *listenSink) Event(ev *core.Event) error {
	if !s.l.follow[s.ns][ev.TaskID] {
		return nil
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if err := s.l.notify(s.ctx, s.ns, ev.TaskID); err != nil {
		return err
	}
	return s.l.doneIfAllEnded()
}

// Gap: the stream resumed from no cursor, so none is reported.
func (s *listenSink) Gap(*core.Gap) error { return nil }

func (s *listenSink) KeepAlive() error {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.l.out.KeepAlive()
}

func (s *listenSink) Flush() error { return nil }
