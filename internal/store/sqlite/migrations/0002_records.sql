-- Records, buckets, blobs and namespace settings. As in 0001, every table
-- is WITHOUT ROWID with the namespace first in its primary key, and there
-- is no secondary index at all: a record write costs two rows (its version
-- and its head), a committed blob upload three (upload in, upload out, blob).

-- The head of each record: one primary-key lookup finds the newest version.
CREATE TABLE record_heads (
  namespace TEXT NOT NULL,
  bucket    TEXT NOT NULL,
  key       TEXT NOT NULL,
  version   INTEGER NOT NULL,
  PRIMARY KEY (namespace, bucket, key)
) WITHOUT ROWID;

-- Every version of every record, values included. History pages walk the
-- primary key backwards from the head.
CREATE TABLE record_versions (
  namespace  TEXT NOT NULL,
  bucket     TEXT NOT NULL,
  key        TEXT NOT NULL,
  version    INTEGER NOT NULL,
  value      TEXT NOT NULL,
  run_id     TEXT,
  task_id    TEXT,
  written_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (namespace, bucket, key, version)
) WITHOUT ROWID;

CREATE TABLE buckets (
  namespace  TEXT NOT NULL,
  name       TEXT NOT NULL,
  public     INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

CREATE TABLE namespace_settings (
  namespace  TEXT NOT NULL,
  raw_policy TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (namespace)
) WITHOUT ROWID;

-- Blob metadata; the bytes live on the filesystem. uploaded_by is the
-- principal whose upload stored them, so the common case needs no reader row.
CREATE TABLE blobs (
  namespace    TEXT NOT NULL,
  sha256       TEXT NOT NULL,
  size         INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  uploaded_by  TEXT NOT NULL,
  run_id       TEXT,
  task_id      TEXT,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (namespace, sha256)
) WITHOUT ROWID;

-- Principals that uploaded bytes the namespace already held (deduplicated).
CREATE TABLE blob_readers (
  namespace    TEXT NOT NULL,
  sha256       TEXT NOT NULL,
  principal_id TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (namespace, sha256, principal_id)
) WITHOUT ROWID;

-- Declared uploads awaiting commit. Only uploads younger than an hour live
-- here, so the sweep scans the table instead of paying an index entry on
-- every declare and commit.
CREATE TABLE uploads (
  namespace    TEXT NOT NULL,
  id           TEXT NOT NULL,
  sha256       TEXT NOT NULL,
  size         INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  principal_id TEXT NOT NULL,
  run_id       TEXT,
  task_id      TEXT,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (namespace, id)
) WITHOUT ROWID;
