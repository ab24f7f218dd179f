-- Issue 31: claims that fit a fleet.
--
-- A task's lane is its queue's share of the tasks with one group and one
-- set of required capabilities; lane 0 (no group, no requirement) has no
-- row. The claim index gains the lane after the lease expiry, which ready
-- tasks hold NULL: each lane's ready tasks are a range in claim order, so
-- a claim seeks the lanes its capabilities match and never walks a task
-- it cannot take; leased tasks still follow by expiry for the lapse check.
ALTER TABLE tasks ADD COLUMN grp TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN requires TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN lane INTEGER NOT NULL DEFAULT 0;
DROP INDEX tasks_claim;
CREATE INDEX tasks_claim ON tasks (finished_at, namespace, queue, state, lease_expires_at, lane, priority DESC, run_at, id);

CREATE TABLE task_lanes (
  id         INTEGER PRIMARY KEY,
  namespace  TEXT NOT NULL,
  queue      TEXT NOT NULL,
  grp        TEXT NOT NULL,
  requires   TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  UNIQUE (namespace, queue, grp, requires)
);

-- A queue with lanes or settings: the claims of any other take the plain
-- path. Tokens are the queue's rate bucket.
CREATE TABLE queue_fleet (
  namespace         TEXT NOT NULL,
  queue             TEXT NOT NULL,
  group_max_running INTEGER NOT NULL DEFAULT 0,
  rate_per_second   REAL NOT NULL DEFAULT 0,
  rate_burst        INTEGER NOT NULL DEFAULT 0,
  tokens            REAL NOT NULL DEFAULT 0,
  tokens_at         INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (namespace, queue)
) WITHOUT ROWID;

-- A group of a queue: its overrides, cooldown, rate bucket, and when it
-- was last granted a task (the claims' rotation).
CREATE TABLE task_groups (
  namespace       TEXT NOT NULL,
  queue           TEXT NOT NULL,
  grp             TEXT NOT NULL,
  max_running     INTEGER,
  rate_per_second REAL NOT NULL DEFAULT 0,
  rate_burst      INTEGER NOT NULL DEFAULT 0,
  tokens          REAL NOT NULL DEFAULT 0,
  tokens_at       INTEGER NOT NULL DEFAULT 0,
  cooldown_until  INTEGER,
  last_granted    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (namespace, queue, grp)
) WITHOUT ROWID;

-- The capability sets claimants showed on a queue, and when last: what
-- tells a lane no live worker could take.
CREATE TABLE queue_claimants (
  namespace    TEXT NOT NULL,
  queue        TEXT NOT NULL,
  capabilities TEXT NOT NULL,
  seen_at      INTEGER NOT NULL,
  PRIMARY KEY (namespace, queue, capabilities)
) WITHOUT ROWID;
