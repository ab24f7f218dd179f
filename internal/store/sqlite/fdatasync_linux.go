package sqlite

import (
	"os"
	"syscall"
)

// fdatasync flushes the file's data, and its size when that changed,
// without the mtime a write also changed: SQLite's unix VFS calls the
// same for its FULL syncs on Linux.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
