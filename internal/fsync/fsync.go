// Package fsync makes a directory's entries durable: after a file is
// created, renamed or linked into a directory, its data may be on disk
// while its name is not, until the directory itself is synced.
package fsync

import (
	"fmt"
	"os"
)

// Dir fsyncs the directory dir.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
