//go:build unix

package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in a data directory whose lock the process using
// its SQLite store holds; it also holds that process's id.
const LockFile = "tessera.lock"

// LockDataDir takes an exclusive lock on dir, held until unlock is called
// or the process ends (the kernel drops it then, kill -9 included, so a
// lock is never left stale). Two processes on one SQLite store would both
// serve, and neither's long-polls would hear the other's enqueues; the
// second is refused instead, with the first's pid.
func LockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock the data directory: %w", err)
		}
		holder := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
			holder = fmt.Sprintf("another process (pid %d)", pid)
		}
		return nil, fmt.Errorf("data directory %s is in use by %s: stop it, or give this one another --data", dir, holder)
	}
	// The pid is for the message above only: on a full disk it may not
	// be written, and the lock holds all the same.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}
