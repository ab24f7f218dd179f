package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tessera-dev/tessera/client"
)

// blobsCmd is `tessera blobs put|get`.
func blobsCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return subcommand("blobs", args, map[string]func([]string) error{
		"put": func(args []string) error { return blobsPut(ctx, args, stdin, stdout, stderr) },
		"get": func(args []string) error { return blobsGet(ctx, args, stdout, stderr) },
	}, stderr)
}

// maxCLIBlob bounds what `blobs put` reads (the server's default limit).
const maxCLIBlob = 32 << 20

func blobsPut(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("blobs put")
	cn := connFlags(fs, stdout, stderr)
	contentType := fs.String("content-type", "application/octet-stream", "the bytes' media type")
	lease := fs.String("lease-token", "", "bind the blob to this lease's run")
	pos, c, err := cn.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	in := stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(io.LimitReader(in, maxCLIBlob+1))
	if err != nil {
		return err
	}
	if len(data) > maxCLIBlob {
		return usagef("blobs put: %s is over %d bytes", pos[0], maxCLIBlob)
	}
	ref, err := c.PutBlob(ctx, data, *contentType, *lease)
	if err != nil {
		return err
	}
	if cn.json {
		return cn.print(map[string]any{"ref": ref, "size": len(data)}, nil)
	}
	_, err = fmt.Fprintln(stdout, ref)
	return err
}

func blobsGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("blobs get")
	cn := connFlags(fs, stdout, stderr)
	out := fs.String("o", "-", "write the bytes to this file (- for stdout)")
	meta := fs.Bool("meta", false, "print the blob's metadata instead of its bytes")
	pos, c, err := cn.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *meta {
		info, err := c.BlobMeta(ctx, pos[0])
		if err != nil {
			return err
		}
		cn.json = true
		return cn.print(info, nil)
	}
	return writeBlob(ctx, c, pos[0], *out, stdout)
}

// writeBlob streams a blob to path, or to stdout for "-". A file is
// written whole or not at all: into a temporary name, renamed at the end.
func writeBlob(ctx context.Context, c *client.Client, ref, path string, stdout io.Writer) error {
	if path == "-" {
		_, err := c.GetBlob(ctx, ref, stdout)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tessera-blob-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := c.GetBlob(ctx, ref, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
