//go:build !linux

package sqlite

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
