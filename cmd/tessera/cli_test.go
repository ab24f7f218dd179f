package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/testserver"
)

// cli runs one tessera command in process, as main would, against url
// with key, and returns its stdout and exit code.
func cli(t *testing.T, url, key, input string, args ...string) (string, int) {
	t.Helper()
	t.Setenv("TESSERA_URL", url)
	t.Setenv("TESSERA_KEY", key)
	stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	code := exitCode(err)
	if code != 0 {
		t.Logf("tessera %s: exit %d: %v", strings.Join(args, " "), code, err)
	}
	return out.String(), code
}

// Every command answers -h with its usage and exit code 0.
func TestHelpExitsZeroForEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"serve", "-h"}, {"admin", "create-key", "-h"}, {"bench", "rows", "-h"}, {"bench", "load", "-h"},
		{"tasks", "-h"}, {"tasks", "enqueue", "-h"}, {"tasks", "list", "-h"}, {"tasks", "get", "-h"}, {"tasks", "cancel", "-h"},
		{"tasks", "pause", "-h"}, {"tasks", "resume", "-h"}, {"tasks", "retry", "-h"}, {"counts", "-h"},
		{"records", "-h"}, {"records", "put", "-h"}, {"records", "get", "-h"}, {"records", "list", "-h"},
		{"blobs", "-h"}, {"blobs", "put", "-h"}, {"blobs", "get", "-h"},
		{"principals", "-h"}, {"principals", "create", "-h"}, {"principals", "list", "-h"},
		{"keys", "-h"}, {"keys", "create", "-h"}, {"keys", "list", "-h"}, {"keys", "revoke", "-h"},
		{"audit", "-h"}, {"work", "-h"}} {
		var out, errOut bytes.Buffer
		if code := exitCode(run(context.Background(), args, &out, &errOut)); code != 0 {
			t.Errorf("tessera %s: exit %d, want 0", strings.Join(args, " "), code)
		}
		if out.Len()+errOut.Len() == 0 {
			t.Errorf("tessera %s printed no usage", strings.Join(args, " "))
		}
	}
}

// The exit code says what happened.
func TestExitCodesSayWhatHappened(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	admin := testserver.AdminKey
	id, code := cli(t, srv.URL, admin, "", "tasks", "enqueue", "--title", "t", "-q")
	id = strings.TrimSpace(id)
	if code != exitOK || len(id) != 26 {
		t.Fatalf("enqueue -q: %q, exit %d", id, code)
	}
	worker, _ := cli(t, srv.URL, admin, "", "principals", "create", "--display-name", "w", "-q")
	key, _ := cli(t, srv.URL, admin, "", "keys", "create", "--principal", strings.TrimSpace(worker), "--scope", "read,namespace:main", "-q")
	for _, c := range []struct {
		key  string
		args []string
		want int
	}{
		{admin, []string{"tasks", "get", id}, exitOK},
		{admin, []string{"tasks", "bogus"}, exitUsage},
		{admin, []string{"tasks", "enqueue"}, exitUsage},                                      // no --title
		{admin, []string{"tasks", "enqueue", "--title", "x", "--priority", "1e9"}, exitUsage}, // a bad flag value
		{admin, []string{"tasks", "enqueue", "--title", strings.Repeat("x", 300)}, exitUsage}, // 400 from the server
		{admin, []string{"tasks", "get", "01JNOSUCHTASK0000000000000"}, exitNotFound},
		{admin, []string{"tasks", "resume", id}, exitConflict}, // not paused
		{strings.TrimSpace(key), []string{"tasks", "enqueue", "--title", "x"}, exitDenied},
		{"tsk_nobody_abcdefghijklmnopqrstuvwxyz0123", []string{"counts"}, exitDenied},
	} {
		if _, code := cli(t, srv.URL, c.key, "", c.args...); code != c.want {
			t.Errorf("tessera %s: exit %d, want %d", strings.Join(c.args, " "), code, c.want)
		}
	}
	if _, code := cli(t, "http://127.0.0.1:1", admin, "", "counts"); code != exitUnreachable {
		t.Errorf("nobody listening: exit %d, want %d", code, exitUnreachable)
	}
}

// The commands print tables for people and the API's JSON with --json.
func TestCommandsPrintTablesAndJSON(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	out, _ := cli(t, srv.URL, k, `{"doc":"r-17"}`, "tasks", "enqueue", "--title", "summarize", "--payload", "-", "--label", "a,b", "--json")
	var task struct {
		ID      string               `json:"id"`
		Payload struct{ Doc string } `json:"payload"`
		Labels  []string             `json:"labels"`
	}
	if err := json.Unmarshal([]byte(out), &task); err != nil || task.Payload.Doc != "r-17" || len(task.Labels) != 2 {
		t.Fatalf("enqueue --json: %s (%v)", out, err)
	}
	if out, _ := cli(t, srv.URL, k, "", "tasks", "list", "--label", "a"); !strings.Contains(out, task.ID) || !strings.Contains(out, "summarize") {
		t.Fatalf("tasks list:\n%s", out)
	}
	if out, _ := cli(t, srv.URL, k, "", "counts"); !strings.Contains(out, "default  0          1") {
		t.Fatalf("counts:\n%s", out)
	}
	if out, _ := cli(t, srv.URL, k, "", "tasks", "pause", task.ID); out != task.ID+"  paused\n" {
		t.Fatalf("pause: %q", out)
	}
	if out, _ := cli(t, srv.URL, k, `{"summary":"v1"}`, "records", "put", "reports", "r-17"); out != "reports/r-17  version 1\n" {
		t.Fatalf("records put: %q", out)
	}
	if out, _ := cli(t, srv.URL, k, "", "records", "get", "reports", "r-17"); out != "{\"summary\":\"v1\"}\n" {
		t.Fatalf("records get: %q", out)
	}
	if _, code := cli(t, srv.URL, k, "", "records", "put", "reports", "r-17", "--value", `"v2"`, "--if-version", "0"); code != exitConflict {
		t.Fatalf("records put --if-version 0 over an existing record: exit %d", code)
	}
	ref, _ := cli(t, srv.URL, k, "some bytes", "blobs", "put", "-")
	if out, _ := cli(t, srv.URL, k, "", "blobs", "get", strings.TrimSpace(ref)); out != "some bytes" {
		t.Fatalf("blobs get: %q", out)
	}
	if out, _ := cli(t, srv.URL, k, "", "audit", "--action", "record.write"); strings.Count(out, "record.write") != 2 || !strings.Contains(out, "version_conflict  1") {
		t.Fatalf("audit:\n%s", out)
	}
	if out, _ := cli(t, srv.URL, k, "", "tasks", "enqueue", "--title", "elsewhere", "-n", "build-farm", "-q"); len(strings.TrimSpace(out)) != 26 {
		t.Fatalf("enqueue in another namespace: %q", out)
	}
	if out, _ := cli(t, srv.URL, k, "", "counts", "--namespace", "build-farm"); !strings.Contains(out, "default  0          1") {
		t.Fatalf("counts in build-farm:\n%s", out)
	}
}
