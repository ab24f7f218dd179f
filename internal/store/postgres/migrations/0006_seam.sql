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
-- SQLite. SQLite has one writer and writes its counts as each task
-- changes, on shard 0. Here writers are concurrent, and two things keep
-- them off each other's counter rows:
--  * a transaction's count changes are gathered as it goes (the triggers
--    below write them to a temporary table of the session's own) and
--    written at its commit, summed per row, in key order: a counter row is
--    locked only for the commit's moment, never while the transaction does
--    other work, and two transactions lock the rows they share in the same
--    order, so they cannot deadlock on them;
--  * each commit writes to the shard of its connection (pg_backend_pid() &
--    15), so connections whose backends do not share a shard never wait on
--    one row at all. A task's count may leave a shard other than the one
--    it entered: a shard can hold a negative count, and only sums over
--    shards mean anything, which is all a read takes.
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

-- The session's gathered count changes. Temporary tables live in no
-- schema of ours and are made on a session's first task change; they roll
-- back with their transaction like any table.
CREATE FUNCTION task_count_deltas_ensure() RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF to_regclass('pg_temp.task_count_deltas') IS NULL THEN
    CREATE TEMPORARY TABLE task_count_deltas (
      namespace TEXT COLLATE "C" NOT NULL,
      queue     TEXT COLLATE "C" NOT NULL,
      state     TEXT COLLATE "C" NOT NULL,
      public    BOOLEAN NOT NULL,
      delta     BIGINT NOT NULL
    );
  END IF;
END $$;

-- Inserts and deletes are gathered once per statement, from its transition
-- table (a 500-task purge is one row per count, not 500). Updates are
-- gathered per row: they are single-row statements, and a row trigger with
-- a WHEN clause costs a heartbeat nothing (a statement trigger can take
-- neither a column list nor WHEN).
CREATE FUNCTION tasks_inserted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM task_count_deltas_ensure();
  INSERT INTO pg_temp.task_count_deltas (namespace, queue, state, public, delta)
    SELECT namespace, queue, s.state, public, count(*)
    FROM inserted CROSS JOIN LATERAL (VALUES ('all'), (CASE WHEN inserted.state <> 'ready' THEN inserted.state END)) s(state)
    WHERE s.state IS NOT NULL
    GROUP BY namespace, queue, s.state, public;
  INSERT INTO task_ready (namespace, queue, public, run_at, id)
    SELECT namespace, queue, public, run_at, id FROM inserted WHERE state = 'ready';
  INSERT INTO public_tasks (namespace, id) SELECT namespace, id FROM inserted WHERE public;
  RETURN NULL;
END $$;

CREATE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM task_count_deltas_ensure();
  INSERT INTO pg_temp.task_count_deltas (namespace, queue, state, public, delta)
    SELECT namespace, queue, s.state, public, -count(*)
    FROM deleted CROSS JOIN LATERAL (VALUES ('all'), (CASE WHEN deleted.state <> 'ready' THEN deleted.state END)) s(state)
    WHERE s.state IS NOT NULL
    GROUP BY namespace, queue, s.state, public;
  DELETE FROM task_ready r USING deleted d WHERE d.state = 'ready'
    AND r.namespace = d.namespace AND r.queue = d.queue AND r.public = d.public AND r.run_at = d.run_at AND r.id = d.id;
  DELETE FROM public_tasks p USING deleted d WHERE d.public AND p.namespace = d.namespace AND p.id = d.id;
  RETURN NULL;
END $$;

-- What a task takes out of the counts and indexes when it leaves a row
-- state (OLD), and puts in when it enters one (NEW), as SQLite's update
-- trigger does.
CREATE FUNCTION tasks_updated() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  moved BOOLEAN := (OLD.queue, OLD.public) IS DISTINCT FROM (NEW.queue, NEW.public);
BEGIN
  IF moved OR OLD.state IS DISTINCT FROM NEW.state THEN
    PERFORM task_count_deltas_ensure();
    INSERT INTO pg_temp.task_count_deltas (namespace, queue, state, public, delta)
      SELECT * FROM (VALUES
        (OLD.namespace, OLD.queue, 'all', OLD.public, -1),
        (NEW.namespace, NEW.queue, 'all', NEW.public, 1),
        (OLD.namespace, OLD.queue, OLD.state, OLD.public, -1),
        (NEW.namespace, NEW.queue, NEW.state, NEW.public, 1)) c(ns, q, st, pub, delta)
      WHERE (moved OR c.st <> 'all') AND c.st <> 'ready';
  END IF;
  IF OLD.state = 'ready' THEN
    DELETE FROM task_ready WHERE namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public
      AND run_at = OLD.run_at AND id = OLD.id;
  END IF;
  IF NEW.state = 'ready' THEN
    INSERT INTO task_ready (namespace, queue, public, run_at, id) VALUES (NEW.namespace, NEW.queue, NEW.public, NEW.run_at, NEW.id);
  END IF;
  IF OLD.public AND NOT NEW.public THEN
    DELETE FROM public_tasks WHERE namespace = OLD.namespace AND id = OLD.id;
  ELSIF NEW.public AND NOT OLD.public THEN
    INSERT INTO public_tasks (namespace, id) VALUES (NEW.namespace, NEW.id);
  END IF;
  RETURN NULL;
END $$;

-- task_counts_flush writes the session's gathered changes, summed, in key
-- order, to its shard. It runs when the transaction commits (deferred
-- constraint triggers; the store fires them just before its COMMIT with
-- SET CONSTRAINTS ALL IMMEDIATE, so the meter sees the writes): the first
-- firing writes everything, the others find nothing left.
CREATE FUNCTION task_counts_flush() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF to_regclass('pg_temp.task_count_deltas') IS NOT NULL THEN
    WITH gathered AS (DELETE FROM pg_temp.task_count_deltas RETURNING *)
    INSERT INTO task_counts (namespace, queue, state, public, shard, count)
      SELECT namespace, queue, state, public, pg_backend_pid() & 15, sum(delta) FROM gathered
      GROUP BY namespace, queue, state, public HAVING sum(delta) <> 0
      ORDER BY namespace, queue, state, public
      ON CONFLICT (namespace, queue, state, public, shard) DO UPDATE SET count = task_counts.count + excluded.count;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER tasks_after_insert AFTER INSERT ON tasks REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION tasks_inserted();
CREATE TRIGGER tasks_after_delete AFTER DELETE ON tasks REFERENCING OLD TABLE AS deleted
  FOR EACH STATEMENT EXECUTE FUNCTION tasks_deleted();
-- TaskUpdate writes only the columns that changed, so a heartbeat does not
-- fire this; the WHEN clause keeps writes of unchanged values free too.
CREATE TRIGGER tasks_after_update AFTER UPDATE OF state, queue, public, run_at ON tasks
  FOR EACH ROW WHEN ((OLD.state, OLD.queue, OLD.public, OLD.run_at) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public, NEW.run_at))
  EXECUTE FUNCTION tasks_updated();
CREATE CONSTRAINT TRIGGER tasks_counts_insert_delete AFTER INSERT OR DELETE ON tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION task_counts_flush();
CREATE CONSTRAINT TRIGGER tasks_counts_update AFTER UPDATE OF state, queue, public ON tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN ((OLD.state, OLD.queue, OLD.public) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public))
  EXECUTE FUNCTION task_counts_flush();

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
