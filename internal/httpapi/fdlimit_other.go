//go:build !unix

package httpapi

func fileLimit() uint64 { return 0 }
