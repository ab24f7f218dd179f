package postgres

import (
	"testing"

	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/blobs/blobtest"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
)

func TestBlobConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blobs.Bytes { return open(t, pgtest.Schema(t), newMeter()).Blobs() })
}
