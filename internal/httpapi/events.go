package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The event stream's side of HTTP: Server-Sent Events
// (https://html.spec.whatwg.org/multipage/server-sent-events.html). The
// core decides what to send and when (core.Stream); this writes it.

const (
	// streamRetry is the reconnection delay a client is told (retry:).
	streamRetry = 3 * time.Second
	// streamWriteTimeout cuts off a client that reads nothing: a write
	// that cannot go out within it ends the stream, so a stalled reader
	// does not hold a goroutine and its buffers for ever.
	streamWriteTimeout = 30 * time.Second
)

// sseSink writes a stream's events to one response.
type sseSink struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	opened bool
	buf    bytes.Buffer
	enc    *json.Encoder
}

func newSSESink(w http.ResponseWriter) *sseSink {
	s := &sseSink{w: w, rc: http.NewResponseController(w)}
	s.enc = json.NewEncoder(&s.buf)
	// The data is JSON for programs, and no HTML page embeds it: titles
	// keep their < and & as they are.
	s.enc.SetEscapeHTML(false)
	return s
}

func (s *sseSink) Open() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// Proxies that buffer (nginx) would hold events back.
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	s.w.WriteHeader(http.StatusOK)
	s.opened = true
	fmt.Fprintf(&s.buf, "retry: %d\n: tessera events\n\n", streamRetry.Milliseconds())
	return s.Flush()
}

func (s *sseSink) Event(e *core.Event) error {
	return s.message(e.ID, e.Kind, e)
}

func (s *sseSink) Gap(g *core.Gap) error {
	if err := s.message(g.ID, "gap", g); err != nil {
		return err
	}
	return s.Flush()
}

// Fault tells the client why the stream ends (its key was revoked), when
// it can no longer be told with a status.
func (s *sseSink) Fault(e *tessera.Error, status int) {
	body := errorBody(http.Header{}, e)
	_ = s.message("", "error", map[string]any{"status": status, "error": body.Error})
	_ = s.Flush()
}

// message writes one event to the buffer: its id, its type, and its data
// as one line of JSON.
func (s *sseSink) message(id, event string, data any) error {
	if id != "" {
		fmt.Fprintf(&s.buf, "id: %s\n", id)
	}
	fmt.Fprintf(&s.buf, "event: %s\ndata: ", event)
	if err := s.enc.Encode(data); err != nil { // ends the line
		return err
	}
	s.buf.WriteByte('\n')
	if s.buf.Len() >= 32<<10 {
		return s.send()
	}
	return nil
}

func (s *sseSink) KeepAlive() error {
	s.buf.WriteString(": keep-alive\n\n")
	return s.Flush()
}

func (s *sseSink) Flush() error {
	if err := s.send(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// done lifts the write deadline once the stream has ended: the
// connection may serve another request.
func (s *sseSink) done() {
	if s.opened {
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}

// send writes the buffer out under the write deadline.
func (s *sseSink) send() error {
	if s.buf.Len() == 0 {
		return nil
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	return err
}
