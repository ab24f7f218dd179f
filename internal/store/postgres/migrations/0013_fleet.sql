-- Issue 31: claims that fit a fleet (SQLite's 0014 says what each part
-- is for). Ready tasks are held by lane in tasks_ready, so a claim seeks
-- the lanes its capabilities match and never walks a task it cannot take.
ALTER TABLE tasks ADD COLUMN grp TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN requires TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN lane BIGINT NOT NULL DEFAULT 0;
DROP INDEX tasks_ready;
CREATE INDEX tasks_ready ON tasks (namespace, queue, lane, priority DESC, run_at, id) WHERE state = 'ready';

CREATE TABLE task_lanes (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  namespace  TEXT COLLATE "C" NOT NULL,
  queue      TEXT COLLATE "C" NOT NULL,
  grp        TEXT COLLATE "C" NOT NULL,
  requires   TEXT COLLATE "C" NOT NULL,
  created_at BIGINT NOT NULL,
  UNIQUE (namespace, queue, grp, requires)
);

CREATE TABLE queue_fleet (
  namespace         TEXT COLLATE "C" NOT NULL,
  queue             TEXT COLLATE "C" NOT NULL,
  group_max_running INTEGER NOT NULL DEFAULT 0,
  rate_per_second   DOUBLE PRECISION NOT NULL DEFAULT 0,
  rate_burst        INTEGER NOT NULL DEFAULT 0,
  tokens            DOUBLE PRECISION NOT NULL DEFAULT 0,
  tokens_at         BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (namespace, queue)
);

CREATE TABLE task_groups (
  namespace       TEXT COLLATE "C" NOT NULL,
  queue           TEXT COLLATE "C" NOT NULL,
  grp             TEXT COLLATE "C" NOT NULL,
  max_running     INTEGER,
  rate_per_second DOUBLE PRECISION NOT NULL DEFAULT 0,
  rate_burst      INTEGER NOT NULL DEFAULT 0,
  tokens          DOUBLE PRECISION NOT NULL DEFAULT 0,
  tokens_at       BIGINT NOT NULL DEFAULT 0,
  cooldown_until  BIGINT,
  last_granted    BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (namespace, queue, grp)
);

CREATE TABLE queue_claimants (
  namespace    TEXT COLLATE "C" NOT NULL,
  queue        TEXT COLLATE "C" NOT NULL,
  capabilities TEXT COLLATE "C" NOT NULL,
  seen_at      BIGINT NOT NULL,
  PRIMARY KEY (namespace, queue, capabilities)
);
