-- The store seam carries its guarantees itself: SQLite's 0006, the same
-- tables and columns. What differs is said where it does: the indexes
-- that serve the claim and the lapse check, and how task_counts spreads
-- concurrent writers over its shards.

ALTER TABLE tasks ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN finished_at BIGINT;
UPDATE tasks SET event_seq = coalesce(
  (SELECT max(seq) FROM task_events e WHERE e.namespace = tasks.namespace AND e.task_id = tasks.id), 0);
UPDATE tasks SET finished_at = updated_at WHERE state IN ('succeeded', 'dead', 'canceled');

-- SQLite serves the claim and the lapse check with one index, where ready
-- tasks share a NULL lease expiry and follow in claim order. PostgreSQL's
-- planner does not take "lease_expires_at IS NULL" as fixing that column,
-- so such an index would sort every ready task of the queue per claim.
-- Two partial indexes instead, each holding only the tasks its statement
-- walks, in the order it walks them: ready tasks in claim order (the claim
-- is the first unlocked entry), leased tasks by expiry (the lapse check is
-- a range from the soonest).
DROP INDEX tasks_claim;
CREATE INDEX tasks_ready ON tasks (namespace, queue, priority DESC, run_at, id)
  WHERE state = 'ready' AND lease_expires_at IS NULL;
CREATE INDEX tasks_lease ON tasks (namespace, queue, lease_expires_at) WHERE state = 'leased';
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;

-- Counts of every task by namespace, queue, stored state and visibility:
-- 'all' counts every task, ready is 'all' less the other states, as in
-- SQLite. shard spreads the rows concurrent writers change: SQLite has one
-- writer and writes shard 0; here each change is written to the shard of
-- the connection that makes it (pg_backend_pid() & 15). So two
-- transactions on different connections never wait on one counter row
-- (unless their backends share a shard), and one transaction's counter
-- writes all land on one shard, which keeps the lock orders of concurrent
-- transactions from crossing. A task's count may leave a shard other than
-- the one it entered: a shard can hold a negative count, and only sums
-- over shards mean anything — which is all a read takes.
CREATE TABLE task_counts (
  namespace TEXT COLLATE "C" NOT NULL,
  queue     TEXT COLLATE "C" NOT NULL,
  state     TEXT COLLATE "C" NOT NULL,
  public    BOOLEAN NOT NULL,
  shard     INTEGER NOT NULL,
  count     BIGINT NOT NULL,
  PRIMARY KEY (namespace, queue, state, public, shard)
);

CREATE TABLE task_ready (
  namespace TEXT COLLATE "C" NOT NULL,
  queue     TEXT COLLATE "C" NOT NULL,
  public    BOOLEAN NOT NULL,
  run_at    BIGINT NOT NULL,
  id        TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, queue, public, run_at, id)
);

INSERT INTO task_counts (namespace, queue, state, public, shard, count)
  SELECT namespace, queue, 'all', public, 0, count(*) FROM tasks GROUP BY namespace, queue, public;
INSERT INTO task_counts (namespace, queue, state, public, shard, count)
  SELECT namespace, queue, state, public, 0, count(*) FROM tasks WHERE state != 'ready' GROUP BY namespace, queue, state, public;
INSERT INTO task_ready (namespace, queue, public, run_at, id)
  SELECT namespace, queue, public, run_at, id FROM tasks WHERE state = 'ready';

DROP TRIGGER public_tasks_after_insert ON tasks;
DROP TRIGGER public_tasks_after_update ON tasks;
DROP TRIGGER public_tasks_after_delete ON tasks;
DROP FUNCTION public_tasks_change();
DROP TABLE public_counts;
DROP TABLE public_ready;

-- task_count_add adds delta to one count, on the connection's shard.
CREATE FUNCTION task_count_add(ns TEXT, q TEXT, st TEXT, pub BOOLEAN, delta INTEGER) RETURNS void
LANGUAGE sql SET search_path FROM CURRENT AS $$
  INSERT INTO task_counts (namespace, queue, state, public, shard, count)
    VALUES (ns, q, st, pub, pg_backend_pid() & 15, delta)
    ON CONFLICT (namespace, queue, state, public, shard) DO UPDATE SET count = task_counts.count + excluded.count;
$$;

-- One function for the three triggers: what a task takes out of the
-- counts and indexes when it leaves a row state (OLD), and what it puts in
-- when it enters one (NEW), as SQLite's three triggers do.
CREATE FUNCTION tasks_change() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  moved BOOLEAN := TG_OP <> 'UPDATE' OR (OLD.queue, OLD.public) IS DISTINCT FROM (NEW.queue, NEW.public);
  restated BOOLEAN := moved OR OLD.state IS DISTINCT FROM NEW.state;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    IF moved THEN
      PERFORM task_count_add(OLD.namespace, OLD.queue, 'all', OLD.public, -1);
    END IF;
    IF restated AND OLD.state <> 'ready' THEN
      PERFORM task_count_add(OLD.namespace, OLD.queue, OLD.state, OLD.public, -1);
    END IF;
    IF OLD.state = 'ready' THEN
      DELETE FROM task_ready WHERE namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public
        AND run_at = OLD.run_at AND id = OLD.id;
    END IF;
    IF OLD.public AND (TG_OP = 'DELETE' OR NOT NEW.public) THEN
      DELETE FROM public_tasks WHERE namespace = OLD.namespace AND id = OLD.id;
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    IF moved THEN
      PERFORM task_count_add(NEW.namespace, NEW.queue, 'all', NEW.public, 1);
    END IF;
    IF restated AND NEW.state <> 'ready' THEN
      PERFORM task_count_add(NEW.namespace, NEW.queue, NEW.state, NEW.public, 1);
    END IF;
    IF NEW.state = 'ready' THEN
      INSERT INTO task_ready (namespace, queue, public, run_at, id) VALUES (NEW.namespace, NEW.queue, NEW.public, NEW.run_at, NEW.id);
    END IF;
    IF NEW.public AND (TG_OP = 'INSERT' OR NOT OLD.public) THEN
      INSERT INTO public_tasks (namespace, id) VALUES (NEW.namespace, NEW.id);
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER tasks_after_insert AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION tasks_change();
-- TaskUpdate writes only the columns that changed, so a heartbeat does not
-- fire this; the WHEN clause keeps writes of unchanged values free too.
CREATE TRIGGER tasks_after_update AFTER UPDATE OF state, queue, public, run_at ON tasks
  FOR EACH ROW WHEN ((OLD.state, OLD.queue, OLD.public, OLD.run_at) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public, NEW.run_at))
  EXECUTE FUNCTION tasks_change();
CREATE TRIGGER tasks_after_delete AFTER DELETE ON tasks FOR EACH ROW EXECUTE FUNCTION tasks_change();

CREATE TABLE principal_namespaces (
  principal_id TEXT COLLATE "C" NOT NULL,
  namespace    TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (principal_id, namespace)
);
INSERT INTO principal_namespaces (principal_id, namespace)
  SELECT DISTINCT principal_id, namespace FROM audit_events ON CONFLICT DO NOTHING;
INSERT INTO principal_namespaces (principal_id, namespace)
  SELECT DISTINCT principal_id, namespace FROM audit_counters ON CONFLICT DO NOTHING;

-- The storage meter's day totals, shared by every node (meter.Ledger).
CREATE TABLE meter_days (
  day               TEXT COLLATE "C" PRIMARY KEY,
  rows_written      BIGINT NOT NULL,
  rows_read         BIGINT NOT NULL,
  allowance_written BIGINT,
  allowance_read    BIGINT
);
