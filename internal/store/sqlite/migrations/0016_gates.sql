-- Issue 39: gates. A task parked on gates is 'gated' on its row (never in
-- the claim's range), counted in a column of its own; its gates live
-- beside it, paid for only by the tasks that have them. tasks.gates
-- counts the gates a task has had, so a claim reads their answers only
-- for a task that had one.
CREATE TABLE task_gates (
  namespace   TEXT NOT NULL,
  task_id     TEXT NOT NULL,
  key         TEXT NOT NULL,
  kind        TEXT NOT NULL,
  message     TEXT NOT NULL,
  schema      TEXT,
  url         TEXT,
  timeout_at  INTEGER,
  -- due_at is timeout_at while the gate is open: what the timers seek.
  due_at      INTEGER,
  on_timeout  TEXT NOT NULL,
  opened_at   INTEGER NOT NULL,
  run_id      TEXT,
  action      TEXT,
  content     TEXT,
  answered_by TEXT,
  answered_at INTEGER,
  PRIMARY KEY (namespace, task_id, key)
) WITHOUT ROWID;
-- Open gates by when they time out: what each node's timer seeks; a gate
-- without a timeout, or answered, has no entry.
CREATE INDEX task_gates_due ON task_gates (due_at) WHERE due_at IS NOT NULL;

ALTER TABLE tasks ADD COLUMN gates INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_counts ADD COLUMN gated INTEGER NOT NULL DEFAULT 0;

-- The count triggers of 0011, with gated beside waiting.
DROP TRIGGER tasks_after_insert;
DROP TRIGGER tasks_after_update;
DROP TRIGGER tasks_after_delete;

CREATE TRIGGER tasks_after_insert AFTER INSERT ON tasks
BEGIN
  INSERT INTO task_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting, gated)
    VALUES (NEW.namespace, NEW.queue, NEW.public, 0, 1, NEW.state = 'leased', NEW.state = 'paused',
      NEW.state = 'succeeded', NEW.state = 'dead', NEW.state = 'canceled', NEW.state = 'waiting', NEW.state = 'gated')
    ON CONFLICT DO UPDATE SET total = total + 1, leased = leased + excluded.leased, paused = paused + excluded.paused,
      succeeded = succeeded + excluded.succeeded, dead = dead + excluded.dead, canceled = canceled + excluded.canceled, waiting = waiting + excluded.waiting, gated = gated + excluded.gated;
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
      waiting = waiting - (OLD.state = 'waiting') + (NEW.state = 'waiting'),
      gated = gated - (OLD.state = 'gated') + (NEW.state = 'gated')
    WHERE OLD.state != NEW.state AND (OLD.queue, OLD.public) IS (NEW.queue, NEW.public)
      AND namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND shard = 0;
  UPDATE task_counts SET total = total - 1, leased = leased - (OLD.state = 'leased'), paused = paused - (OLD.state = 'paused'),
      succeeded = succeeded - (OLD.state = 'succeeded'), dead = dead - (OLD.state = 'dead'), canceled = canceled - (OLD.state = 'canceled'),
      waiting = waiting - (OLD.state = 'waiting'), gated = gated - (OLD.state = 'gated')
    WHERE (OLD.queue, OLD.public) IS NOT (NEW.queue, NEW.public)
      AND namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND shard = 0;
  INSERT INTO task_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting, gated)
    SELECT NEW.namespace, NEW.queue, NEW.public, 0, 1, NEW.state = 'leased', NEW.state = 'paused',
      NEW.state = 'succeeded', NEW.state = 'dead', NEW.state = 'canceled', NEW.state = 'waiting', NEW.state = 'gated'
    WHERE (OLD.queue, OLD.public) IS NOT (NEW.queue, NEW.public)
    ON CONFLICT DO UPDATE SET total = total + 1, leased = leased + excluded.leased, paused = paused + excluded.paused,
      succeeded = succeeded + excluded.succeeded, dead = dead + excluded.dead, canceled = canceled + excluded.canceled, waiting = waiting + excluded.waiting, gated = gated + excluded.gated;

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
      waiting = waiting - (OLD.state = 'waiting'), gated = gated - (OLD.state = 'gated')
    WHERE namespace = OLD.namespace AND queue = OLD.queue AND public = OLD.public AND shard = 0;
  DELETE FROM public_ready WHERE OLD.public AND OLD.state = 'ready'
    AND namespace = OLD.namespace AND queue = OLD.queue AND run_at = OLD.run_at AND id = OLD.id;
  DELETE FROM public_tasks WHERE OLD.public AND namespace = OLD.namespace AND id = OLD.id;
END;
