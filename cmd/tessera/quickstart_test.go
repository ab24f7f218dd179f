package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's quickstart runs as written: its shell blocks between the
// <!-- quickstart --> markers are extracted from README.md (not copied
// here) and run in order by bash -e, in an empty directory, with the
// built binary on PATH. The one change is the address: a free port in
// place of 127.0.0.1:8787, so a server a developer runs is not in the way.
func TestREADMEQuickstartRuns(t *testing.T) {
	bin := buildTessera(t)
	for _, tool := range []string{"bash", "curl", "jq", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quickstart needs %s (`make test` installs it): %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script := quickstartScript(t, string(readme))
	script = strings.ReplaceAll(script, "127.0.0.1:8787", freeAddr(t))

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = cleanEnv("PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"))
	// Its own process group, so the server it starts in the background
	// goes with it whatever happens.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatalf("the quickstart failed: %v\n--- output\n%s\n--- server.log\n%s", err, out.String(), log)
	}
	for _, want := range []string{
		`result     {"summary":"TESSERA COORDINATES WORK FOR FLEETS OF AGENTS","attempt":1}`, // tessera work finished it
		`progress   {"step":"writing"}`,                                        // fd 3 became heartbeat progress
		"refused with exit code 5",                                             // the scoped key may not enqueue
		"task.enqueue  forbidden  1",                                           // and the audit counts it
		"\nsummarize r-17\n",                                                   // the board shows the public task
		"summarizer submitted “summarize r-17”",                                // the activity feed too
		"default  0        0      0          0      0       0       0       2", // both tasks succeeded
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the quickstart's output lacks %q\n--- output\n%s", want, out.String())
		}
	}
}

// quickstartScript joins the sh blocks of the README's quickstart.
func quickstartScript(t *testing.T, readme string) string {
	start := strings.Index(readme, "<!-- quickstart -->")
	end := strings.Index(readme, "<!-- /quickstart -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no <!-- quickstart --> … <!-- /quickstart --> section")
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(readme[start:end], -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatal("the quickstart section has no sh block")
	}
	return strings.Join(blocks, "\n")
}

// The README's flag table lists every flag of tessera serve with the
// default serve -h prints, so a new flag or a changed default cannot go
// unmentioned.
func TestREADMEListsEveryServeFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // flag → its table row
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(strings.SplitN(line, " | ", 2)[0], -1) {
			rows[m[1]] = line
		}
	}
	var usage bytes.Buffer
	if err := serve(context.Background(), []string{"-h"}, &usage); err == nil {
		t.Fatal("serve -h did not stop at its usage")
	}
	flags := regexp.MustCompile(`(?m)^  --?([a-z-]+)(?: \w+)?\n\s+(.*)$`).FindAllStringSubmatch(usage.String(), -1)
	if len(flags) < 20 {
		t.Fatalf("read only %d flags from serve -h:\n%s", len(flags), usage.String())
	}
	// The defaults the flag package appends: quoted for strings, bare
	// for numbers and durations.
	deflt := regexp.MustCompile(`\(default (?:"([^"]*)"|([0-9][0-9a-z.]*))\)$`)
	for _, f := range flags {
		name, help := f[1], f[2]
		row, ok := rows[name]
		if !ok {
			t.Errorf("README's flag table lacks --%s (%s)", name, help)
			continue
		}
		m := deflt.FindStringSubmatch(help)
		if m == nil {
			continue
		}
		want := m[1] + m[2]
		if d, err := time.ParseDuration(want); err == nil && d >= time.Hour && d%time.Hour == 0 {
			want = fmt.Sprintf("%dh", d/time.Hour) // 168h0m0s is written 168h
		}
		if !strings.Contains(row, "`"+want+"`") {
			t.Errorf("README's row for --%s does not give its default `%s`: %s", name, want, row)
		}
	}
}
