-- Records, buckets, blobs and namespace settings: SQLite's 0002, with the
-- types of 0001. No secondary index, as there.

CREATE TABLE record_heads (
  namespace TEXT COLLATE "C" NOT NULL,
  bucket    TEXT COLLATE "C" NOT NULL,
  key       TEXT COLLATE "C" NOT NULL,
  version   BIGINT NOT NULL,
  PRIMARY KEY (namespace, bucket, key)
);

CREATE TABLE record_versions (
  namespace  TEXT COLLATE "C" NOT NULL,
  bucket     TEXT COLLATE "C" NOT NULL,
  key        TEXT COLLATE "C" NOT NULL,
  version    BIGINT NOT NULL,
  value      TEXT NOT NULL,
  run_id     TEXT,
  task_id    TEXT,
  written_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (namespace, bucket, key, version)
);

CREATE TABLE buckets (
  namespace  TEXT COLLATE "C" NOT NULL,
  name       TEXT COLLATE "C" NOT NULL,
  public     BOOLEAN NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (namespace, name)
);

CREATE TABLE namespace_settings (
  namespace  TEXT COLLATE "C" NOT NULL,
  raw_policy TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (namespace)
);

CREATE TABLE blobs (
  namespace    TEXT COLLATE "C" NOT NULL,
  sha256       TEXT COLLATE "C" NOT NULL,
  size         BIGINT NOT NULL,
  content_type TEXT NOT NULL,
  uploaded_by  TEXT NOT NULL,
  run_id       TEXT,
  task_id      TEXT,
  created_at   BIGINT NOT NULL,
  PRIMARY KEY (namespace, sha256)
);

CREATE TABLE blob_readers (
  namespace    TEXT COLLATE "C" NOT NULL,
  sha256       TEXT COLLATE "C" NOT NULL,
  principal_id TEXT COLLATE "C" NOT NULL,
  created_at   BIGINT NOT NULL,
  PRIMARY KEY (namespace, sha256, principal_id)
);

-- Only uploads of the last hour live here: the sweep scans the table.
CREATE TABLE uploads (
  namespace    TEXT COLLATE "C" NOT NULL,
  id           TEXT COLLATE "C" NOT NULL,
  sha256       TEXT NOT NULL,
  size         BIGINT NOT NULL,
  content_type TEXT NOT NULL,
  principal_id TEXT NOT NULL,
  run_id       TEXT,
  task_id      TEXT,
  created_at   BIGINT NOT NULL,
  PRIMARY KEY (namespace, id)
);
