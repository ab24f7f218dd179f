-- The live event stream and the operator console: SQLite's 0009, the same
-- columns and table. Adding columns without a default rewrites nothing.
ALTER TABLE audit_events
  ADD COLUMN task_id TEXT COLLATE "C",
  ADD COLUMN queue   TEXT COLLATE "C",
  ADD COLUMN state   TEXT;

CREATE TABLE queue_pauses (
  namespace TEXT COLLATE "C" NOT NULL,
  queue     TEXT COLLATE "C" NOT NULL,
  paused_by TEXT NOT NULL,
  paused_at BIGINT NOT NULL,
  PRIMARY KEY (namespace, queue)
);
