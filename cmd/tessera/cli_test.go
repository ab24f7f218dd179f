package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// cli runs one tessera command in process, as main would, against url
// with key, and returns its stdout and exit code.
func cli(t *testing.T, url, key, input string, args ...string) (string, int) {
	t.Helper()
	out, _, err := cliRun(t, url, key, input, args...)
	code := exitCode(err)
	if code != 0 {
		t.Logf("tessera %s: exit %d: %v", strings.Join(args, " "), code, err)
	}
	return out, code
}

// cliRun is cli returning stdout, stderr and the error.
func cliRun(t *testing.T, url, key, input string, args ...string) (string, string, error) {
	t.Helper()
	t.Setenv("TESSERA_URL", url)
	t.Setenv("TESSERA_KEY", key)
	stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// Every command answers -h with its usage and exit code 0: a line
// "usage: tessera …", and its flags spelled as the command line takes them
// (--name; one letter -n).
func TestHelpExitsZeroForEveryCommand(t *testing.T) {
	singleDash := regexp.MustCompile(`(?m)^  -[a-z][a-z-]+`)
	for _, args := range [][]string{{"-h"}, {"help"}, {"serve", "-h"}, {"admin", "create-key", "-h"}, {"admin", "blobs", "migrate", "-h"},
		{"bench", "rows", "-h"}, {"bench", "load", "-h"},
		{"tasks", "-h"}, {"tasks", "enqueue", "-h"}, {"tasks", "list", "-h"}, {"tasks", "get", "-h"}, {"tasks", "cancel", "-h"},
		{"tasks", "pause", "-h"}, {"tasks", "resume", "-h"}, {"tasks", "retry", "-h"}, {"counts", "-h"},
		{"records", "-h"}, {"records", "put", "-h"}, {"records", "get", "-h"}, {"records", "list", "-h"},
		{"blobs", "-h"}, {"blobs", "put", "-h"}, {"blobs", "get", "-h"},
		{"principals", "-h"}, {"principals", "create", "-h"}, {"principals", "list", "-h"},
		{"keys", "-h"}, {"keys", "create", "-h"}, {"keys", "list", "-h"}, {"keys", "revoke", "-h"},
		{"queues", "-h"}, {"queues", "fleet", "-h"}, {"queues", "settings", "-h"}, {"queues", "group", "-h"},
		{"audit", "-h"}, {"work", "-h"}, {"tail", "-h"}} {
		var out, errOut bytes.Buffer
		if code := exitCode(run(context.Background(), args, &out, &errOut)); code != 0 {
			t.Errorf("tessera %s: exit %d, want 0", strings.Join(args, " "), code)
		}
		help := out.String() + errOut.String()
		if !strings.HasPrefix(help, "usage: tessera") {
			t.Errorf("tessera %s printed no usage line:\n%s", strings.Join(args, " "), help)
		}
		if m := singleDash.FindString(help); m != "" {
			t.Errorf("tessera %s lists a flag as %q, not as the command line spells it (--)", strings.Join(args, " "), m)
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
	if out, _ := cli(t, srv.URL, k, "", "counts"); !strings.Contains(out, "default  0        0      0          1") {
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
	if out, _ := cli(t, srv.URL, k, "", "counts", "--namespace", "build-farm"); !strings.Contains(out, "default  0        0      0          1") {
		t.Fatalf("counts in build-farm:\n%s", out)
	}
}

// The client flags may come before the command: they act as if given
// after it, and one given again after the command wins.
func TestClientFlagsBeforeTheCommand(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	out, code := cli(t, "http://127.0.0.1:1", "", "", "--url", srv.URL, "--key="+k, "-n", "build", "tasks", "enqueue", "--title", "t", "-q")
	if code != exitOK || len(strings.TrimSpace(out)) != 26 {
		t.Fatalf("enqueue with the flags first: %q, exit %d", out, code)
	}
	if out, _ := cli(t, srv.URL, k, "", "--json", "-n", "elsewhere", "counts", "-n", "build"); out != "{\n  \"queues\": {\n    \"default\": {\n      \"ready\": 1\n    }\n  }\n}\n" {
		t.Fatalf("counts --json, -n given before and after:\n%s", out)
	}
	if _, code := cli(t, srv.URL, k, "", "--bogus", "counts"); code != exitUsage {
		t.Fatalf("an unknown flag before the command: exit %d", code)
	}
}

// tessera --version is tessera version: the version, the commit the go
// command stamped (a checkout's builds have it), and Go's version.
func TestVersion(t *testing.T) {
	a, _, err := cliRun(t, "", "", "", "version")
	b, _, err2 := cliRun(t, "", "", "", "--version")
	if err != nil || err2 != nil || a != b || a != versionLine(buildInfo())+"\n" {
		t.Fatalf("version %q (%v), --version %q (%v)", a, err, b, err2)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "66dbfbb0e1"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionLine(bi), "tessera "+version+" commit 66dbfbb0e1 (modified) of 2026-12-01T10:00:00Z go1.26.8"; got != want {
		t.Fatalf("version line %q, want %q", got, want)
	}
}

// Mistakes the CLI can tell before asking the server are told locally,
// saying what to do: no key, an unknown --state; a server that is not
// there is named.
func TestMistakesAreToldWithWhatToDo(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	_, _, err := cliRun(t, "http://127.0.0.1:1", "", "", "counts")
	if exitCode(err) != exitDenied || err.Error() != "no key: set TESSERA_KEY or --key (the server prints an admin key at its first start)" {
		t.Fatalf("no key: %v (exit %d)", err, exitCode(err))
	}
	_, _, err = cliRun(t, srv.URL, testserver.AdminKey, "", "tasks", "list", "--state", "runing")
	if exitCode(err) != exitUsage || err.Error() != `--state "runing": want one of waiting, gated, scheduled, ready, leased, paused, succeeded, dead, canceled` {
		t.Fatalf("a bad --state: %v (exit %d)", err, exitCode(err))
	}
	_, _, err = cliRun(t, "http://127.0.0.1:1", testserver.AdminKey, "", "counts")
	if exitCode(err) != exitUnreachable || explain(err).Error() != "no server at http://127.0.0.1:1: connection refused (is tessera serve running there? --url or TESSERA_URL says where)" {
		t.Fatalf("nobody listening: %v (exit %d)", explain(err), exitCode(err))
	}
}

// keys create warns of a key that can do nothing: without an action
// scope, or without a namespace, unless it is admin.
func TestKeysCreateWarnsOfAKeyThatCanDoNothing(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	p, _ := cli(t, srv.URL, k, "", "principals", "create", "--display-name", "w", "-q")
	for scopes, warning := range map[string]string{
		"read":                "warning: this key can do nothing: it has no namespace grant (namespace:NAME, or namespace:* for all)\n",
		"namespace:main":      "warning: this key can do nothing: it has no action scope (read, enqueue, claim or write)\n",
		"namespace:main,read": "",
		"admin":               "",
	} {
		_, stderr, err := cliRun(t, srv.URL, k, "", "keys", "create", "--principal", strings.TrimSpace(p), "--scope", scopes, "-q")
		if err != nil || stderr != warning {
			t.Errorf("--scope %s: %v, stderr %q, want %q", scopes, err, stderr, warning)
		}
	}
}

// Canceling a running task says the holder will be told; canceling one
// that waits says nothing more than its new state.
func TestCancelOfARunningTaskSaysTheHolderIsTold(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	c, err := client.New(srv.URL, client.WithKey(k))
	if err != nil {
		t.Fatal(err)
	}
	running, _ := cli(t, srv.URL, k, "", "tasks", "enqueue", "--title", "runs", "-q")
	running = strings.TrimSpace(running)
	if cl, _, err := c.Claim(context.Background(), client.ClaimRequest{}); err != nil || cl == nil || cl.Task.ID != running {
		t.Fatalf("claim: %v", err)
	}
	waiting, _ := cli(t, srv.URL, k, "", "tasks", "enqueue", "--title", "waits", "-q")
	waiting = strings.TrimSpace(waiting)
	out, stderr, err := cliRun(t, srv.URL, k, "", "tasks", "cancel", running, waiting)
	if err != nil || out != running+"  leased\n"+waiting+"  canceled\n" {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	if want := running + " is running: cancel requested; the worker holding it is told at its next heartbeat (at once if it watches claim events), which ends it as canceled (or its lease's lapse does)\n"; stderr != want {
		t.Fatalf("cancel said %q, want %q", stderr, want)
	}
}

// The audit table names principals: every one for an admin key, its own
// for another key.
func TestAuditNamesPrincipals(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	p, _ := cli(t, srv.URL, k, "", "principals", "create", "--display-name", "summarizer", "-q")
	p = strings.TrimSpace(p)
	key, _ := cli(t, srv.URL, k, "", "keys", "create", "--principal", p, "--scope", "namespace:main,enqueue", "-q")
	key = strings.TrimSpace(key)
	if _, code := cli(t, srv.URL, key, "", "tasks", "enqueue", "--title", "t"); code != exitOK {
		t.Fatal("enqueue failed")
	}
	row := regexp.MustCompile(regexp.QuoteMeta(p) + `  summarizer\s+task\.enqueue`)
	if out, _ := cli(t, srv.URL, k, "", "audit", "--all", "--action", "task.enqueue"); !row.MatchString(out) {
		t.Fatalf("audit --all by the admin:\n%s", out)
	}
	if out, _ := cli(t, srv.URL, key, "", "audit", "--action", "task.enqueue"); !row.MatchString(out) {
		t.Fatalf("audit by the worker itself:\n%s", out)
	}
}

// A title that reorders the text around it is shown with its bidi
// controls escaped in a table (a terminal would apply them: "\u202egnp.exe"
// reads "exe.png"), and kept as it is in --json, which is data.
func TestTablesEscapeBidiControls(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	title := "\u202egnp.exe \u2067isolated\u2069"
	if _, code := cli(t, srv.URL, k, "", "tasks", "enqueue", "--title", title); code != 0 {
		t.Fatal("enqueue failed")
	}
	out, _ := cli(t, srv.URL, k, "", "tasks", "list")
	if !strings.Contains(out, `\u202Egnp.exe \u2067isolated\u2069`) || strings.ContainsAny(out, "\u202e\u2067\u2069") {
		t.Fatalf("tasks list:\n%q", out)
	}
	js, _ := cli(t, srv.URL, k, "", "tasks", "list", "--json")
	var page struct{ Tasks []struct{ Title string } }
	if err := json.Unmarshal([]byte(js), &page); err != nil || len(page.Tasks) != 1 || page.Tasks[0].Title != title {
		t.Fatalf("tasks list --json: %s (%v)", js, err)
	}
}

// tasks enqueue --unique-key: a repeat while the task is unfinished prints
// that task's id and says on stderr that nothing new was made; tasks get
// shows the key.
func TestEnqueueUniqueKeyCLI(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	admin := testserver.AdminKey
	first, code := cli(t, srv.URL, admin, "", "tasks", "enqueue", "--title", "sync", "--unique-key", "acct-7", "-q")
	if code != exitOK {
		t.Fatalf("first enqueue: exit %d", code)
	}
	again, errOut, err := cliRun(t, srv.URL, admin, "", "tasks", "enqueue", "--title", "sync", "--unique-key", "acct-7", "-q")
	if err != nil || again != first || !strings.Contains(errOut, "holds unique key \"acct-7\"") {
		t.Errorf("the repeat printed %q, stderr %q, %v; want %q and a note that no task was made", again, errOut, err, first)
	}
	got, _ := cli(t, srv.URL, admin, "", "tasks", "get", strings.TrimSpace(first))
	if !regexp.MustCompile(`(?m)^unique key\s+acct-7$`).MatchString(got) {
		t.Errorf("tasks get does not show the key:\n%s", got)
	}
}

// tasks enqueue --debounce-key: a repeat while the task is unclaimed
// prints that task's id and says on stderr that it was moved on.
func TestEnqueueDebounceCLI(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	admin := testserver.AdminKey
	args := []string{"tasks", "enqueue", "--title", "reindex", "--debounce-key", "doc-9", "--debounce-seconds", "60", "-q"}
	first, code := cli(t, srv.URL, admin, "", args...)
	if code != exitOK {
		t.Fatalf("first enqueue: exit %d", code)
	}
	again, errOut, err := cliRun(t, srv.URL, admin, "", args...)
	if err != nil || again != first || !strings.Contains(errOut, "holds debounce key \"doc-9\": moved on") {
		t.Errorf("the repeat printed %q, stderr %q, %v; want %q and a note that it was moved on", again, errOut, err, first)
	}
	got, _ := cli(t, srv.URL, admin, "", "tasks", "get", strings.TrimSpace(first))
	if !regexp.MustCompile(`(?m)^debounce key\s+doc-9$`).MatchString(got) {
		t.Errorf("tasks get does not show the key:\n%s", got)
	}
}
