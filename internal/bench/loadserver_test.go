package bench

import (
	"os"
	"testing"
	"time"
)

// utime and stime are counted from the last ')', since a command name
// may hold spaces and parentheses.
func TestParseProcStatCPU(t *testing.T) {
	stat := "4242 (tes sera) (x)) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 1234 800000000 5000"
	got, err := parseProcStatCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Errorf("cpu = %v, %v; want 3s (250 + 50 ticks)", got, err)
	}
	for _, bad := range []string{"", "4242 tessera S 1", "4242 (t) S 1 2 3", "4242 (t) S 1 2 3 4 5 6 7 8 9 10 x 0", "4242 (t) S 1 2 3 4 5 6 7 8 9 10 -5 0"} {
		if _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// This process's own figures read from /proc, as a started server's are.
func TestProcStatusOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this platform: the bench reports memory and CPU as n/a")
	}
	rss, _, ok := procStatus(os.Getpid())
	if !ok || rss < 1<<20 {
		t.Errorf("rss %d, ok %v: a Go test process holds more than 1 MiB", rss, ok)
	}
}

func FuzzParseProcStatCPU(f *testing.F) {
	f.Add("4242 (tessera) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0")
	f.Add("1 ((() S")
	f.Fuzz(func(t *testing.T, stat string) {
		if d, err := parseProcStatCPU(stat); err == nil && d < 0 {
			t.Errorf("%q: negative CPU time %v", stat, d)
		}
	})
}
