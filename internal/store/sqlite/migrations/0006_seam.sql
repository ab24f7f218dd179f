-- The store seam carries its guarantees itself (package store), so they
-- hold on a backend with concurrent writers too, and claims cost what they
-- return, not the namespace's history.

-- Conditional writes: every change of a task is written over the version
-- it was read at. Event numbers live on the task row (no max+1), and
-- finished_at dates a terminal state for retention.
ALTER TABLE tasks ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN finished_at INTEGER;
UPDATE tasks SET event_seq = coalesce(
  (SELECT max(seq) FROM task_events e WHERE e.namespace = tasks.namespace AND e.task_id = tasks.id), 0);
UPDATE tasks SET finished_at = updated_at WHERE state IN ('succeeded', 'dead', 'canceled');

-- One index serves the claim and the lapse check, each a seek bounded by
-- what it returns: only leased tasks have a lease expiry, so ready tasks
-- share its NULL and follow in claim order (priority, then run_at, then
-- id), and leased tasks follow in expiry order, the lapsed ones first.
-- (The 0001 index had no expiry: the lapse check walked every leased task,
-- and SQLite's planner preferred walking the whole namespace.)
DROP INDEX tasks_claim;
CREATE INDEX tasks_claim ON tasks (namespace, queue, state, lease_expires_at, priority DESC, run_at, id);
-- Retention of finished tasks walks them oldest first, across namespaces.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;

-- Counts of every task, public or not, by namespace, queue, stored state
-- and visibility, kept by triggers: GET /v1/counts, health and metrics cost
-- O(queues). The state 'all' counts every task; ready has no row of its
-- own and is 'all' less the other states, so the commonest changes —
-- enqueue, claim, release, a lapse back to ready — each move one row.
-- shard spreads one queue's counts over several rows on a backend with
-- concurrent writers (PostgreSQL), so concurrent claims do not all wait on
-- one row; SQLite has one writer and uses shard 0 only. Rows that fall to
-- zero are kept: they are few and reused.
CREATE TABLE task_counts (
  namespace TEXT NOT NULL,
  queue     TEXT NOT NULL,
  state     TEXT NOT NULL,
  public    INTEGER NOT NULL,
  shard     INTEGER NOT NULL,
  count     INTEGER NOT NULL,
  PRIMARY KEY (namespace, queue, state, public, shard)
) WITHOUT ROWID;

-- Every task stored ready, by queue, visibility and run_at: the oldest
-- claimable task of a queue is one seek, and the scheduled ones (run_at
-- ahead) are a range. (The claim index orders ready tasks by priority.)
CREATE TABLE task_ready (
  namespace TEXT NOT NULL,
  queue     TEXT NOT NULL,
  public    INTEGER NOT NULL,
  run_at    INTEGER NOT NULL,
  id        TEXT NOT NULL,
  PRIMARY KEY (namespace, queue, public, run_at, id)
) WITHOUT ROWID;

INSERT INTO task_counts (namespace, queue, state, public, shard, count)
  SELECT namespace, queue, 'all', public, 0, count(*) FROM tasks GROUP BY namespace, queue, public;
INSERT INTO task_counts (namespace, queue, state, public, shard, count)
  SELECT namespace, queue, state, public, 0, count(*) FROM tasks WHERE state != 'ready' GROUP BY namespace, queue, state, public;
INSERT INTO task_ready (namespace, queue, public, run_at, id)
  SELECT namespace, queue, public, run_at, id FROM tasks WHERE state = 'ready';

-- The public-only tables of 0004 are subsumed.
DROP TRIGGER public_tasks_after_insert;
DROP TRIGGER public_tasks_after_update;
DROP TRIGGER public_tasks_after_delete;
DROP TABLE public_counts;
DROP TABLE public_ready;

CREATE TRIGGER tasks_after_insert AFTER INSERT ON tasks
BEGIN
  INSERT INTO task_counts (namespace, queue, state, public, shard, count)
    VALUES (NEW.namespace, NEW.queue, 'all', NEW.public, 0, 1)
    ON CONFLICT DO UPDATE SET count = count + 1;
  INSERT INTO task_counts (namespace, queue, state, public, shard, count)
    SELECT NEW.namespace, NEW.queue, NEW.state, NEW.public, 0, 1 WHERE NEW.state != 'ready'
    ON CONFLICT DO UPDATE SET count = count + 1;
  INSERT INTO task_ready (namespace, queue, public, run_at, id)
    SELECT NEW.namespace, NEW.queue, NEW.public, NEW.run_at, NEW.id WHERE NEW.state = 'ready';
  INSERT INTO public_tasks (namespace, id) SELECT NEW.namespace, NEW.id WHERE NEW.public;
END;

-- TaskUpdate writes only the columns that changed, so a heartbeat (lease
-- expiry, progress) does not fire this at all; the WHEN clause keeps
-- writes of unchanged values free too. Queue and public never change after
-- insert today; the trigger covers them anyway (a task moving takes its
-- 'all' count along), so a future store method cannot skew the counts.
CREATE TRIGGER tasks_after_update AFTER UPDATE OF state, queue, public, run_at ON tasks
WHEN (OLD.state, OLD.queue, OLD.public, OLD.run_at) IS NOT (NEW.state, NEW.queue, NEW.public, NEW.run_at)
BEGIN
  UPDATE task_counts SET count = count - 1
    WHERE OLD.state != 'ready' AND (OLD.state, OLD.queue, OLD.public) IS NOT (NEW.state, NEW.queue, NEW.public)
      AND namespace = OLD.namespace AND queue = OLD.queue AND state = OLD.state AND public = OLD.public AND shard = 0;
  INSERT INTO task_counts (namespace, queue, state, public, shard, count)
    SELECT NEW.namespace, NEW.queue, NEW.state, NEW.public, 0, 1
    WHERE NEW.state != 'ready' AND (OLD.state, OLD.queue, OLD.public) IS NOT (NEW.state, NEW.queue, NEW.public)
    ON CONFLICT DO UPDATE SET count = count + 1;
  UPDATE task_counts SET count = count - 1
    WHERE (OLD.queue, OLD.public) IS NOT (NEW.queue, NEW.public)
      AND namespace = OLD.namespace AND queue = OLD.queue AND state = 'all' AND public = OLD.public AND shard = 0;
  INSERT INTO task_counts (namespace, queue, state, public, shard, count)
    SELECT NEW.namespace, NEW.queue, 'all', NEW.public, 0, 1 WHERE (OLD.queue, OLD.public) IS NOT (NEW.queue, NEW.public)
    ON CONFLICT DO UPDATE SET count = count + 1;

  DELETE FROM task_ready WHERE OLD.state = 'ready'
    AND namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND run_at = OLD.run_at AND id = OLD.id;
  INSERT INTO task_ready (namespace, queue, public, run_at, id)
    SELECT NEW.namespace, NEW.queue, NEW.public, NEW.run_at, NEW.id WHERE NEW.state = 'ready';

  DELETE FROM public_tasks WHERE OLD.public AND NOT NEW.public AND namespace = OLD.namespace AND id = OLD.id;
  INSERT INTO public_tasks (namespace, id) SELECT NEW.namespace, NEW.id WHERE NEW.public AND NOT OLD.public;
END;

CREATE TRIGGER tasks_after_delete AFTER DELETE ON tasks
BEGIN
  UPDATE task_counts SET count = count - 1
    WHERE namespace = OLD.namespace AND queue = OLD.queue AND state = 'all' AND public = OLD.public AND shard = 0;
  UPDATE task_counts SET count = count - 1
    WHERE OLD.state != 'ready' AND namespace = OLD.namespace AND queue = OLD.queue AND state = OLD.state AND public = OLD.public AND shard = 0;
  DELETE FROM task_ready WHERE OLD.state = 'ready'
    AND namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND run_at = OLD.run_at AND id = OLD.id;
  DELETE FROM public_tasks WHERE OLD.public AND namespace = OLD.namespace AND id = OLD.id;
END;

-- The namespaces each principal acted or was counted in: GET /v1/me/audit
-- visits those, not every namespace. Written once per pair (the core
-- remembers the pairs it wrote), so it costs nothing per action.
CREATE TABLE principal_namespaces (
  principal_id TEXT NOT NULL,
  namespace    TEXT NOT NULL,
  PRIMARY KEY (principal_id, namespace)
) WITHOUT ROWID;
INSERT OR IGNORE INTO principal_namespaces (principal_id, namespace)
  SELECT DISTINCT principal_id, namespace FROM audit_events;
INSERT OR IGNORE INTO principal_namespaces (principal_id, namespace)
  SELECT DISTINCT principal_id, namespace FROM audit_counters;

-- The storage meter's day totals, shared by every node of a deployment
-- (each adds its rows every few seconds), and an allowance an operator set
-- for that day (NULL: the flags apply).
CREATE TABLE meter_days (
  day               TEXT PRIMARY KEY,
  rows_written      INTEGER NOT NULL,
  rows_read         INTEGER NOT NULL,
  allowance_written INTEGER,
  allowance_read    INTEGER
) WITHOUT ROWID;
