//go:build !unix

package app

// LockFile is the file in a data directory whose lock the process using
// its SQLite store holds.
const LockFile = "tessera.lock"

// LockDataDir locks nothing where flock(2) does not exist: there, keep
// one process per data directory yourself.
func LockDataDir(dir string) (unlock func(), err error) { return func() {}, nil }
