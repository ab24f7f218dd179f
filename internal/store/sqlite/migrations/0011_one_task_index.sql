-- Issue 28: a task's change writes one index entry and one count row.
--
-- One index on tasks serves the claim, the lapse check and retention.
-- finished_at leads: live tasks share its NULL and follow by queue, state,
-- lease expiry, then claim order (priority, run_at, id), as the 0006 index
-- had them; finished tasks follow by the time they finished, across
-- namespaces, which is the order retention deletes them in. A submit moves
-- the task's one entry instead of moving one and adding another to
-- tasks_finished.
DROP INDEX tasks_claim;
DROP INDEX tasks_finished;
CREATE INDEX tasks_claim ON tasks (finished_at, namespace, queue, state, lease_expires_at, priority DESC, run_at, id);

-- Counts: one row per queue and visibility, a column per stored state
-- (ready is total less the others), so a change of state writes one row
-- where it wrote two (out of one state's row, into the other's).
DROP TRIGGER tasks_after_insert;
DROP TRIGGER tasks_after_update;
DROP TRIGGER tasks_after_delete;
CREATE TABLE task_state_counts (
  namespace TEXT NOT NULL,
  queue     TEXT NOT NULL,
  public    INTEGER NOT NULL,
  shard     INTEGER NOT NULL,
  total     INTEGER NOT NULL,
  leased    INTEGER NOT NULL,
  paused    INTEGER NOT NULL,
  succeeded INTEGER NOT NULL,
  dead      INTEGER NOT NULL,
  canceled  INTEGER NOT NULL,
  waiting   INTEGER NOT NULL,
  PRIMARY KEY (namespace, queue, public, shard)
) WITHOUT ROWID;
INSERT INTO task_state_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting)
  SELECT namespace, queue, public, 0, sum(count * (state = 'all')), sum(count * (state = 'leased')),
    sum(count * (state = 'paused')), sum(count * (state = 'succeeded')), sum(count * (state = 'dead')),
    sum(count * (state = 'canceled')), sum(count * (state = 'waiting'))
  FROM task_counts GROUP BY namespace, queue, public;
DROP TABLE task_counts;
ALTER TABLE task_state_counts RENAME TO task_counts;

-- Ready tasks by run_at, for the public ones only: what a health read
-- without a key shows (the oldest public ready task, the public scheduled
-- ones). Every task's oldest ready and scheduled are found in the claim
-- index, a seek per priority the queue's ready tasks hold, so a private
-- task pays no entry here.
CREATE TABLE public_ready (
  namespace TEXT NOT NULL,
  queue     TEXT NOT NULL,
  run_at    INTEGER NOT NULL,
  id        TEXT NOT NULL,
  PRIMARY KEY (namespace, queue, run_at, id)
) WITHOUT ROWID;
INSERT INTO public_ready (namespace, queue, run_at, id)
  SELECT namespace, queue, run_at, id FROM task_ready WHERE public;
DROP TABLE task_ready;

CREATE TRIGGER tasks_after_insert AFTER INSERT ON tasks
BEGIN
  INSERT INTO task_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting)
    VALUES (NEW.namespace, NEW.queue, NEW.public, 0, 1, NEW.state = 'leased', NEW.state = 'paused',
      NEW.state = 'succeeded', NEW.state = 'dead', NEW.state = 'canceled', NEW.state = 'waiting')
    ON CONFLICT DO UPDATE SET total = total + 1, leased = leased + excluded.leased, paused = paused + excluded.paused,
      succeeded = succeeded + excluded.succeeded, dead = dead + excluded.dead, canceled = canceled + excluded.canceled, waiting = waiting + excluded.waiting;
  INSERT INTO public_ready (namespace, queue, run_at, id)
    SELECT NEW.namespace, NEW.queue, NEW.run_at, NEW.id WHERE NEW.public AND NEW.state = 'ready';
  INSERT INTO public_tasks (namespace, id) SELECT NEW.namespace, NEW.id WHERE NEW.public;
END;

-- TaskUpdate writes only the columns that changed, so a heartbeat (lease
-- expiry, progress) does not fire this at all. Queue and public never
-- change after insert today; the trigger covers them anyway (the task's
-- counts move rows), so a future store method cannot skew the counts.
CREATE TRIGGER tasks_after_update AFTER UPDATE OF state, queue, public, run_at ON tasks
WHEN (OLD.state, OLD.queue, OLD.public, OLD.run_at) IS NOT (NEW.state, NEW.queue, NEW.public, NEW.run_at)
BEGIN
  UPDATE task_counts SET leased = leased - (OLD.state = 'leased') + (NEW.state = 'leased'),
      paused = paused - (OLD.state = 'paused') + (NEW.state = 'paused'),
      succeeded = succeeded - (OLD.state = 'succeeded') + (NEW.state = 'succeeded'),
      dead = dead - (OLD.state = 'dead') + (NEW.state = 'dead'),
      canceled = canceled - (OLD.state = 'canceled') + (NEW.state = 'canceled'),
      waiting = waiting - (OLD.state = 'waiting') + (NEW.state = 'waiting')
    WHERE OLD.state != NEW.state AND (OLD.queue, OLD.public) IS (NEW.queue, NEW.public)
      AND namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND shard = 0;
  UPDATE task_counts SET total = total - 1, leased = leased - (OLD.state = 'leased'), paused = paused - (OLD.state = 'paused'),
      succeeded = succeeded - (OLD.state = 'succeeded'), dead = dead - (OLD.state = 'dead'), canceled = canceled - (OLD.state = 'canceled'),
      waiting = waiting - (OLD.state = 'waiting')
    WHERE (OLD.queue, OLD.public) IS NOT (NEW.queue, NEW.public)
      AND namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND shard = 0;
  INSERT INTO task_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting)
    SELECT NEW.namespace, NEW.queue, NEW.public, 0, 1, NEW.state = 'leased', NEW.state = 'paused',
      NEW.state = 'succeeded', NEW.state = 'dead', NEW.state = 'canceled', NEW.state = 'waiting'
    WHERE (OLD.queue, OLD.public) IS NOT (NEW.queue, NEW.public)
    ON CONFLICT DO UPDATE SET total = total + 1, leased = leased + excluded.leased, paused = paused + excluded.paused,
      succeeded = succeeded + excluded.succeeded, dead = dead + excluded.dead, canceled = canceled + excluded.canceled, waiting = waiting + excluded.waiting;

  DELETE FROM public_ready WHERE OLD.public AND OLD.state = 'ready'
    AND namespace = OLD.namespace AND queue = OLD.queue AND run_at = OLD.run_at AND id = OLD.id;
  INSERT INTO public_ready (namespace, queue, run_at, id)
    SELECT NEW.namespace, NEW.queue, NEW.run_at, NEW.id WHERE NEW.public AND NEW.state = 'ready';

  DELETE FROM public_tasks WHERE OLD.public AND NOT NEW.public AND namespace = OLD.namespace AND id = OLD.id;
  INSERT INTO public_tasks (namespace, id) SELECT NEW.namespace, NEW.id WHERE NEW.public AND NOT OLD.public;
END;

CREATE TRIGGER tasks_after_delete AFTER DELETE ON tasks
BEGIN
  UPDATE task_counts SET total = total - 1, leased = leased - (OLD.state = 'leased'), paused = paused - (OLD.state = 'paused'),
      succeeded = succeeded - (OLD.state = 'succeeded'), dead = dead - (OLD.state = 'dead'), canceled = canceled - (OLD.state = 'canceled'),
      waiting = waiting - (OLD.state = 'waiting')
    WHERE namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND shard = 0;
  DELETE FROM public_ready WHERE OLD.public AND OLD.state = 'ready'
    AND namespace = OLD.namespace AND queue = OLD.queue AND run_at = OLD.run_at AND id = OLD.id;
  DELETE FROM public_tasks WHERE OLD.public AND namespace = OLD.namespace AND id = OLD.id;
END;
