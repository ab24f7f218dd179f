package postgres_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// pgProxy stands between a store and the test's PostgreSQL server,
// forwarding each TCP connection, and can hold the connections of one
// application_name (read from their startup message): while held, their
// bytes stop flowing both ways and new ones never reach the server, yet
// every socket stays open — a backend stopped with SIGSTOP, or a network
// path gone silent.
type pgProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	held   string        // the application_name held, "" for none
	resume chan struct{} // closed when the hold ends
	conns  []net.Conn
}

// startProxy starts a proxy to the server of url and returns url pointed
// at the proxy. Everything stops at the test's end.
func startProxy(t *testing.T, rawURL string) (string, *pgProxy) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("the proxy needs a postgres:// URL with a host, not %q: %v", rawURL, err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() {
		p.release()
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	u.Host = ln.Addr().String()
	return u.String(), p
}

// hold stops the connections whose application_name contains app, those
// open and those to come, until release.
func (p *pgProxy) hold(app string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held, p.resume = app, make(chan struct{})
}

func (p *pgProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != "" {
		p.held = ""
		close(p.resume)
	}
}

// gate returns once app's connections may carry bytes.
func (p *pgProxy) gate(app string) {
	p.mu.Lock()
	held, resume := p.held, p.resume
	p.mu.Unlock()
	if held != "" && strings.Contains(app, held) {
		<-resume
	}
}

func (p *pgProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(client)
	}
}

func (p *pgProxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, client, server)
	p.mu.Unlock()
	defer client.Close()
	defer server.Close()
	startup, app, err := readStartup(client)
	if err != nil {
		return
	}
	p.gate(app)
	if _, err := server.Write(startup); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, app); done <- struct{}{} }()
	go func() { p.pipe(client, server, app); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, each chunk through the gate.
func (p *pgProxy) pipe(dst, src net.Conn, app string) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate(app)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readStartup reads a connection's first message, the startup message
// (the tests connect with sslmode=disable, so there is no SSL request
// before it), and returns it with the application_name it names.
func readStartup(c net.Conn) ([]byte, string, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, "", err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 8 || n > 1<<16 {
		return nil, "", io.ErrUnexpectedEOF
	}
	msg := make([]byte, n)
	copy(msg, size[:])
	if _, err := io.ReadFull(c, msg[4:]); err != nil {
		return nil, "", err
	}
	// After the length and the protocol version: name, value, … as
	// NUL-terminated strings.
	fields := bytes.Split(msg[8:], []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		if string(fields[i]) == "application_name" {
			return msg, string(fields[i+1]), nil
		}
	}
	return msg, "", nil
}
