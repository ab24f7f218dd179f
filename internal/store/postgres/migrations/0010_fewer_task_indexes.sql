-- Issue 28: SQLite's 0009. A task's change writes fewer index entries
-- beside its primary key, and one count row.
--
-- Two partial indexes where there were three (the meter counts partial
-- ones whole, so each was a row of every task write): ready tasks in
-- claim order, for the claim and the ready reads, as in 0006; every other
-- task in tasks_claim, by finished_at first as in SQLite's one index, so
-- live leased tasks follow by queue and expiry (the lapse check) and
-- finished ones by when they finished (retention). Ready tasks stay in an
-- index of their own (sqlschema.Dialect says why): in one index with the
-- leased ones, a claim under load walked the dead entries of every claim
-- before it.
DROP INDEX tasks_lease;
DROP INDEX tasks_finished;
CREATE INDEX tasks_claim ON tasks (finished_at, namespace, queue, state, lease_expires_at) WHERE state <> 'ready';
DROP INDEX tasks_ready;
CREATE INDEX tasks_ready ON tasks (namespace, queue, priority DESC, run_at, id) WHERE state = 'ready';

-- Counts: one row per queue, visibility and shard, a column per stored
-- state (ready is total less the others). A transaction's changes are
-- still gathered in a temporary table and written at its commit, summed
-- per row; a change of state now moves one row where it moved two.
DROP TRIGGER tasks_after_insert ON tasks;
DROP TRIGGER tasks_after_delete ON tasks;
DROP TRIGGER tasks_after_update ON tasks;
DROP TRIGGER tasks_counts_insert_delete ON tasks;
DROP TRIGGER tasks_counts_update ON tasks;
DROP FUNCTION tasks_inserted();
DROP FUNCTION tasks_deleted();
DROP FUNCTION tasks_updated();
DROP FUNCTION task_counts_flush();
DROP FUNCTION task_count_deltas_ensure();

CREATE TABLE task_state_counts (
  namespace TEXT COLLATE "C" NOT NULL,
  queue     TEXT COLLATE "C" NOT NULL,
  public    BOOLEAN NOT NULL,
  shard     INTEGER NOT NULL,
  total     BIGINT NOT NULL,
  leased    BIGINT NOT NULL,
  paused    BIGINT NOT NULL,
  succeeded BIGINT NOT NULL,
  dead      BIGINT NOT NULL,
  canceled  BIGINT NOT NULL,
  waiting   BIGINT NOT NULL,
  PRIMARY KEY (namespace, queue, public, shard)
);
INSERT INTO task_state_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting)
  SELECT namespace, queue, public, shard, coalesce(sum(count) FILTER (WHERE state = 'all'), 0), coalesce(sum(count) FILTER (WHERE state = 'leased'), 0),
    coalesce(sum(count) FILTER (WHERE state = 'paused'), 0), coalesce(sum(count) FILTER (WHERE state = 'succeeded'), 0),
    coalesce(sum(count) FILTER (WHERE state = 'dead'), 0), coalesce(sum(count) FILTER (WHERE state = 'canceled'), 0),
    coalesce(sum(count) FILTER (WHERE state = 'waiting'), 0)
  FROM task_counts GROUP BY namespace, queue, public, shard;
DROP TABLE task_counts;
ALTER TABLE task_state_counts RENAME TO task_counts;
ALTER TABLE task_counts RENAME CONSTRAINT task_state_counts_pkey TO task_counts_pkey;

-- Ready public tasks by run_at, for a health read without a key; every
-- task's oldest ready and scheduled are read from the claim index.
CREATE TABLE public_ready (
  namespace TEXT COLLATE "C" NOT NULL,
  queue     TEXT COLLATE "C" NOT NULL,
  run_at    BIGINT NOT NULL,
  id        TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, queue, run_at, id)
);
INSERT INTO public_ready (namespace, queue, run_at, id)
  SELECT namespace, queue, run_at, id FROM task_ready WHERE public;
DROP TABLE task_ready;

-- The session's gathered count changes, a row per change of a queue's
-- counts. (A new name: a session of a node not yet upgraded may hold the
-- old table, shaped the old way.)
CREATE FUNCTION task_state_deltas_ensure() RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF to_regclass('pg_temp.task_state_deltas') IS NULL THEN
    CREATE TEMPORARY TABLE task_state_deltas (
      namespace TEXT COLLATE "C" NOT NULL,
      queue     TEXT COLLATE "C" NOT NULL,
      public    BOOLEAN NOT NULL,
      total     BIGINT NOT NULL,
      leased    BIGINT NOT NULL,
      paused    BIGINT NOT NULL,
      succeeded BIGINT NOT NULL,
      dead      BIGINT NOT NULL,
      canceled  BIGINT NOT NULL,
      waiting   BIGINT NOT NULL
    );
  END IF;
END $$;

-- Inserts and deletes are gathered once per statement, from its
-- transition table; updates per row, by a row trigger whose WHEN clause
-- costs a heartbeat nothing.
CREATE FUNCTION tasks_inserted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM task_state_deltas_ensure();
  INSERT INTO pg_temp.task_state_deltas
    SELECT namespace, queue, public, count(*), count(*) FILTER (WHERE state = 'leased'), count(*) FILTER (WHERE state = 'paused'),
      count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'dead'), count(*) FILTER (WHERE state = 'canceled'),
      count(*) FILTER (WHERE state = 'waiting')
    FROM inserted GROUP BY namespace, queue, public;
  INSERT INTO public_ready (namespace, queue, run_at, id)
    SELECT namespace, queue, run_at, id FROM inserted WHERE public AND state = 'ready';
  INSERT INTO public_tasks (namespace, id) SELECT namespace, id FROM inserted WHERE public;
  RETURN NULL;
END $$;

CREATE FUNCTION tasks_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM task_state_deltas_ensure();
  INSERT INTO pg_temp.task_state_deltas
    SELECT namespace, queue, public, -count(*), -count(*) FILTER (WHERE state = 'leased'), -count(*) FILTER (WHERE state = 'paused'),
      -count(*) FILTER (WHERE state = 'succeeded'), -count(*) FILTER (WHERE state = 'dead'), -count(*) FILTER (WHERE state = 'canceled'),
      -count(*) FILTER (WHERE state = 'waiting')
    FROM deleted GROUP BY namespace, queue, public;
  DELETE FROM public_ready r USING deleted d WHERE d.public AND d.state = 'ready'
    AND r.namespace = d.namespace AND r.queue = d.queue AND r.run_at = d.run_at AND r.id = d.id;
  DELETE FROM public_tasks p USING deleted d WHERE d.public AND p.namespace = d.namespace AND p.id = d.id;
  RETURN NULL;
END $$;

-- What a task takes out of its counts row when it leaves a state (OLD),
-- and puts in when it enters one (NEW), as SQLite's update trigger does.
CREATE FUNCTION tasks_updated() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  moved BOOLEAN := (OLD.queue, OLD.public) IS DISTINCT FROM (NEW.queue, NEW.public);
BEGIN
  IF moved OR OLD.state IS DISTINCT FROM NEW.state THEN
    PERFORM task_state_deltas_ensure();
    INSERT INTO pg_temp.task_state_deltas VALUES
      (OLD.namespace, OLD.queue, OLD.public, -moved::int, -(OLD.state = 'leased')::int, -(OLD.state = 'paused')::int,
        -(OLD.state = 'succeeded')::int, -(OLD.state = 'dead')::int, -(OLD.state = 'canceled')::int, -(OLD.state = 'waiting')::int),
      (NEW.namespace, NEW.queue, NEW.public, moved::int, (NEW.state = 'leased')::int, (NEW.state = 'paused')::int,
        (NEW.state = 'succeeded')::int, (NEW.state = 'dead')::int, (NEW.state = 'canceled')::int, (NEW.state = 'waiting')::int);
  END IF;
  IF OLD.public AND OLD.state = 'ready' THEN
    DELETE FROM public_ready WHERE namespace = OLD.namespace AND queue = OLD.queue AND run_at = OLD.run_at AND id = OLD.id;
  END IF;
  IF NEW.public AND NEW.state = 'ready' THEN
    INSERT INTO public_ready (namespace, queue, run_at, id) VALUES (NEW.namespace, NEW.queue, NEW.run_at, NEW.id);
  END IF;
  IF OLD.public AND NOT NEW.public THEN
    DELETE FROM public_tasks WHERE namespace = OLD.namespace AND id = OLD.id;
  ELSIF NEW.public AND NOT OLD.public THEN
    INSERT INTO public_tasks (namespace, id) VALUES (NEW.namespace, NEW.id);
  END IF;
  RETURN NULL;
END $$;

-- task_counts_flush writes the session's gathered changes, summed per
-- row, in key order, to its connection's shard (0006 says why), when the
-- transaction commits: the first firing writes everything, the others
-- find nothing left.
CREATE FUNCTION task_counts_flush() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF to_regclass('pg_temp.task_state_deltas') IS NOT NULL THEN
    WITH gathered AS (DELETE FROM pg_temp.task_state_deltas RETURNING *)
    INSERT INTO task_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting)
      SELECT namespace, queue, public, pg_backend_pid() & 15, sum(total), sum(leased), sum(paused), sum(succeeded), sum(dead), sum(canceled), sum(waiting)
      FROM gathered GROUP BY namespace, queue, public
      HAVING (sum(total), sum(leased), sum(paused), sum(succeeded), sum(dead), sum(canceled), sum(waiting)) <> (0, 0, 0, 0, 0, 0, 0)
      ORDER BY namespace, queue, public
      ON CONFLICT (namespace, queue, public, shard) DO UPDATE SET total = task_counts.total + excluded.total,
        leased = task_counts.leased + excluded.leased, paused = task_counts.paused + excluded.paused,
        succeeded = task_counts.succeeded + excluded.succeeded, dead = task_counts.dead + excluded.dead,
        canceled = task_counts.canceled + excluded.canceled, waiting = task_counts.waiting + excluded.waiting;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER tasks_after_insert AFTER INSERT ON tasks REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION tasks_inserted();
CREATE TRIGGER tasks_after_delete AFTER DELETE ON tasks REFERENCING OLD TABLE AS deleted
  FOR EACH STATEMENT EXECUTE FUNCTION tasks_deleted();
CREATE TRIGGER tasks_after_update AFTER UPDATE OF state, queue, public, run_at ON tasks
  FOR EACH ROW WHEN ((OLD.state, OLD.queue, OLD.public, OLD.run_at) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public, NEW.run_at))
  EXECUTE FUNCTION tasks_updated();
CREATE CONSTRAINT TRIGGER tasks_counts_insert_delete AFTER INSERT OR DELETE ON tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION task_counts_flush();
CREATE CONSTRAINT TRIGGER tasks_counts_update AFTER UPDATE OF state, queue, public ON tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN ((OLD.state, OLD.queue, OLD.public) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public))
  EXECUTE FUNCTION task_counts_flush();
