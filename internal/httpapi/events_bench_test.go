package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
)

// enqueueEvents makes n task.enqueued events, 500 to a batch.
func enqueueEvents(s *testServer, n int) {
	for done := 0; done < n; {
		batch := make([]map[string]any, min(500, n-done))
		for i := range batch {
			batch[i] = map[string]any{"title": fmt.Sprintf("event %d", done+i), "queue": "bench"}
		}
		s.enqueueBatch("main", adminKey, map[string]any{"tasks": batch})
		done += len(batch)
	}
}

// BenchmarkEventStreamReplay times one stream reading events it missed:
// the stream resumes before b.N events that committed while it was away
// and reads them all, as fast as the trail, the SSE encoding and a client
// reading it allow. ns/op is per event.
func BenchmarkEventStreamReplay(b *testing.B) {
	s := newTestServer(b)
	st := s.openStream("/v1/events", adminKey)
	s.enqueue("main", adminKey, map[string]any{"title": "before"})
	before := st.event()
	st.close()
	enqueueEvents(s, b.N)

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	read := 0
	reportRows(b, s, func() {
		st = s.openStream("/v1/events", adminKey, "Last-Event-ID", before.ID)
		for read < b.N {
			if m := st.next(); m.Event == core.KindEnqueued {
				read++
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(read)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkEventStreamLive times one stream following events as they
// commit: a producer enqueues b.N tasks in batches of 500 while the
// stream reads them. The producer's commits bound it as much as the
// stream; events/s is what the stream kept up with.
func BenchmarkEventStreamLive(b *testing.B) {
	s := newTestServer(b)
	st := s.openStream("/v1/events", adminKey)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		enqueueEvents(s, b.N)
	}()
	for read := 0; read < b.N; {
		if m := st.next(); m.Event == core.KindEnqueued {
			read++
		}
	}
	b.StopTimer()
	<-produced
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// idleStreams is how many streams BenchmarkIdleEventStreams holds open.
const idleStreams = 1000

// BenchmarkIdleEventStreams opens 1,000 keyed streams and leaves them
// idle, keep-alives flowing: it reports the server's memory per stream
// (heap and stacks, and the process's resident set; the clients are bare
// connections, a few hundred bytes each) and the rows the idle streams
// read and wrote (none).
func BenchmarkIdleEventStreams(b *testing.B) {
	for range b.N {
		s := newTestServer(b, func(c *core.Config) {
			c.StreamsPerKey, c.MaxStreams, c.StreamKeepAlive = idleStreams, idleStreams, 100*time.Millisecond
		})
		u, err := url.Parse(s.URL)
		if err != nil {
			b.Fatal(err)
		}
		before := memory(b)
		conns := make([]net.Conn, 0, idleStreams)
		for range idleStreams {
			conns = append(conns, openRaw(b, u.Host, adminKey))
		}
		for s.Core.OpenStreams() < idleStreams {
			time.Sleep(10 * time.Millisecond)
		}
		// Every stream has had its first look at the trail and a
		// keep-alive or two: from here on they are idle.
		time.Sleep(300 * time.Millisecond)
		written, read := s.Meter.Lifetime()
		time.Sleep(time.Second) // ten keep-alives each
		writtenAfter, readAfter := s.Meter.Lifetime()
		after := memory(b)
		b.ReportMetric(float64(after.heap-before.heap)/idleStreams, "heap_B/stream")
		b.ReportMetric(float64(after.stack-before.stack)/idleStreams, "stack_B/stream")
		b.ReportMetric(float64(after.rss-before.rss)/idleStreams, "rss_B/stream")
		b.ReportMetric(float64(after.goroutines-before.goroutines)/idleStreams, "goroutines/stream")
		b.ReportMetric(float64(writtenAfter-written), "idle_rows_written")
		b.ReportMetric(float64(readAfter-read), "idle_rows_read")
		for _, c := range conns {
			c.Close()
		}
	}
}

// openRaw opens a stream on a bare connection and reads its opening.
func openRaw(b *testing.B, host, key string) net.Conn {
	b.Helper()
	c, err := net.Dial("tcp", host)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", host, key)
	r := bufio.NewReaderSize(c, 512)
	var head bytes.Buffer
	for !bytes.Contains(head.Bytes(), []byte("tessera events\n\n")) {
		line, err := r.ReadBytes('\n')
		if err != nil {
			b.Fatalf("open a stream: %v after %q", err, head.String())
		}
		head.Write(line)
	}
	if !bytes.HasPrefix(head.Bytes(), []byte("HTTP/1.1 200")) {
		b.Fatalf("open a stream: %q", head.String())
	}
	return c
}

// usage is a process's memory: heap and goroutine stacks in use after a
// collection, the resident set, and the goroutines.
type usage struct {
	heap, stack, rss uint64
	goroutines       int
}

func memory(b *testing.B) usage {
	b.Helper()
	// Each collection may halve a goroutine stack that uses under a
	// quarter of it: a few let the idle streams' stacks settle to what
	// waiting needs, not what their first read did.
	for range 4 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	u := usage{heap: m.HeapInuse, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			u.rss = kb << 10
		}
	}
	return u
}
