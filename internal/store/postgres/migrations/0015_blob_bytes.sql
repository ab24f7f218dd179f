-- Issue 42: blob bytes in the database, where every node reads them
-- (blobs.go). Bytes arrive for an upload as blob_parts, which hold only
-- uploads in flight; the commit copies them to their content address,
-- blob_chunks, once per namespace and digest, and the parts go. Every
-- chunk but a blob's last holds chunkSize bytes, so an offset names its
-- chunk; a blob's chunk 0 always exists, empty for an empty blob. The
-- bytes are kept out of line and uncompressed (STORAGE EXTERNAL):
-- uploads are mostly compressed already, and a range read then fetches
-- only the chunks it needs.
CREATE TABLE blob_parts (
  upload_id   TEXT COLLATE "C" NOT NULL,
  seq         INTEGER NOT NULL,
  data        BYTEA NOT NULL,
  received_at BIGINT NOT NULL,
  PRIMARY KEY (upload_id, seq)
);
ALTER TABLE blob_parts ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE blob_chunks (
  namespace TEXT COLLATE "C" NOT NULL,
  sha256    TEXT COLLATE "C" NOT NULL,
  seq       INTEGER NOT NULL,
  data      BYTEA NOT NULL,
  PRIMARY KEY (namespace, sha256, seq)
);
ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
