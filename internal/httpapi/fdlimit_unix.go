//go:build unix

package httpapi

import "syscall"

// fileLimit is the process's limit on open files (Go raises the soft
// limit to the hard one at start-up); 0 if unknown.
func fileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
