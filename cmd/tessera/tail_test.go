package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// tessera tail prints the namespace's events one line each, from where
// --after says, until --count: kind, task, queue and state, and the title
// quoted so that a bidi override comes out escaped, not obeyed by the
// terminal.
func TestTailPrintsEvents(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	admin := testserver.AdminKey
	first, _ := cli(t, srv.URL, admin, "", "tasks", "enqueue", "--title", "start", "--queue", "q", "-q")
	if _, code := cli(t, srv.URL, admin, "", "tasks", "enqueue", "--title", "\u202egnp.exe", "--queue", "q"); code != exitOK {
		t.Fatalf("enqueue: exit %d", code)
	}
	// The first task's enqueue event is the one after the first task's id
	// (ids are made in order): --after its id resumes before both.
	out, code := cli(t, srv.URL, admin, "", "tail", "--after", strings.TrimSpace(first), "--count", "2")
	if code != exitOK {
		t.Fatalf("tail: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("tail printed %q", out)
	}
	for _, want := range []string{"task.enqueued", "queue=q", "state=ready", `"start"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], `"\u202egnp.exe"`) || strings.ContainsRune(lines[1], '\u202e') {
		t.Errorf("a hostile title printed as %q", lines[1])
	}

	out, code = cli(t, srv.URL, admin, "", "--json", "tail", "--after", strings.TrimSpace(first), "--count", "1")
	var ev client.Event
	if err := json.Unmarshal([]byte(out), &ev); code != exitOK || err != nil || ev.Kind != client.KindEnqueued || ev.Title != "start" {
		t.Fatalf("tail --json: %q, exit %d: %v", out, code, err)
	}
	if _, code := cli(t, srv.URL, "tsk_nosuchkey_abcdefghijklmnopqrstuvwxyz0123", "", "tail"); code != exitDenied {
		t.Fatalf("tail with an unknown key: exit %d, want %d", code, exitDenied)
	}
}
