-- Public state (SPEC §3.2, §10): what a health or board refresh and the
-- activity feed read, kept so that each costs O(queues) or O(page), never
-- O(tasks) or O(events), however much private work shares the namespace.
--
-- Every table here is maintained by triggers, not by the Go code: every
-- path that inserts, changes or deletes a task or an audit event (enqueue,
-- claim, lapse, submit, cancel, retry, purge, retention...) is covered
-- without anyone having to remember a second write. The PostgreSQL backend
-- will get the equivalent triggers (PL/pgSQL, same tables) in its own
-- migrations.
--
-- The triggers act only on public rows, so private work pays nothing. What
-- they write is metered like any other write (the preupdate hook sees
-- trigger-made rows): a public task costs three more rows at enqueue
-- (count, list, ready entry), two at each change of state (count out and
-- in) plus one when it enters or leaves ready; a public audit event one.

-- Per namespace, queue and stored state, the number of public tasks. The
-- stored states are ready, leased, paused, succeeded, dead and canceled; a
-- ready task whose run_at is still ahead (scheduled, to clients) is counted
-- as ready, because time passing writes nothing. Rows that fall to zero are
-- kept: they are few (queues × states) and reused at the next change.
CREATE TABLE public_counts (
  namespace TEXT NOT NULL,
  queue     TEXT NOT NULL,
  state     TEXT NOT NULL,
  count     INTEGER NOT NULL,
  PRIMARY KEY (namespace, queue, state)
) WITHOUT ROWID;

-- The public tasks of each namespace by id (ULIDs, so newest last): the
-- board walks this key backwards instead of every task of the namespace.
CREATE TABLE public_tasks (
  namespace TEXT NOT NULL,
  id        TEXT NOT NULL,
  PRIMARY KEY (namespace, id)
) WITHOUT ROWID;

-- The public tasks stored ready, by queue and run_at: the first entry of a
-- queue is its oldest ready task, one seek away. (The claim index orders
-- ready tasks by priority first, and holds private tasks too.)
CREATE TABLE public_ready (
  namespace TEXT NOT NULL,
  queue     TEXT NOT NULL,
  run_at    INTEGER NOT NULL,
  id        TEXT NOT NULL,
  PRIMARY KEY (namespace, queue, run_at, id)
) WITHOUT ROWID;

-- Tasks stored before this migration.
INSERT INTO public_counts (namespace, queue, state, count)
  SELECT namespace, queue, state, count(*) FROM tasks WHERE public GROUP BY namespace, queue, state;
INSERT INTO public_tasks (namespace, id) SELECT namespace, id FROM tasks WHERE public;
INSERT INTO public_ready (namespace, queue, run_at, id)
  SELECT namespace, queue, run_at, id FROM tasks WHERE public AND state = 'ready';

CREATE TRIGGER public_tasks_after_insert AFTER INSERT ON tasks WHEN NEW.public
BEGIN
  INSERT INTO public_counts (namespace, queue, state, count) VALUES (NEW.namespace, NEW.queue, NEW.state, 1)
    ON CONFLICT DO UPDATE SET count = count + 1;
  INSERT INTO public_tasks (namespace, id) VALUES (NEW.namespace, NEW.id);
  INSERT INTO public_ready (namespace, queue, run_at, id)
    SELECT NEW.namespace, NEW.queue, NEW.run_at, NEW.id WHERE NEW.state = 'ready';
END;

-- TaskUpdate sets state and run_at on every update (a heartbeat too), so
-- the WHEN clause is what keeps unchanged rows free. Queue and public never
-- change after insert today; the trigger covers them anyway, so a future
-- store method cannot skew what the board shows.
CREATE TRIGGER public_tasks_after_update AFTER UPDATE OF state, queue, public, run_at ON tasks
WHEN (OLD.public OR NEW.public)
  AND (OLD.state, OLD.queue, OLD.public, OLD.run_at) IS NOT (NEW.state, NEW.queue, NEW.public, NEW.run_at)
BEGIN
  UPDATE public_counts SET count = count - 1
    WHERE OLD.public AND (OLD.state, OLD.queue, OLD.public) IS NOT (NEW.state, NEW.queue, NEW.public)
      AND namespace = OLD.namespace AND queue = OLD.queue AND state = OLD.state;
  INSERT INTO public_counts (namespace, queue, state, count)
    SELECT NEW.namespace, NEW.queue, NEW.state, 1
    WHERE NEW.public AND (OLD.state, OLD.queue, OLD.public) IS NOT (NEW.state, NEW.queue, NEW.public)
    ON CONFLICT DO UPDATE SET count = count + 1;

  DELETE FROM public_tasks WHERE OLD.public AND NOT NEW.public AND namespace = OLD.namespace AND id = OLD.id;
  INSERT INTO public_tasks (namespace, id) SELECT NEW.namespace, NEW.id WHERE NEW.public AND NOT OLD.public;

  DELETE FROM public_ready WHERE OLD.public AND OLD.state = 'ready'
    AND namespace = OLD.namespace AND queue = OLD.queue AND run_at = OLD.run_at AND id = OLD.id;
  INSERT INTO public_ready (namespace, queue, run_at, id)
    SELECT NEW.namespace, NEW.queue, NEW.run_at, NEW.id WHERE NEW.public AND NEW.state = 'ready';
END;

CREATE TRIGGER public_tasks_after_delete AFTER DELETE ON tasks WHEN OLD.public
BEGIN
  UPDATE public_counts SET count = count - 1
    WHERE namespace = OLD.namespace AND queue = OLD.queue AND state = OLD.state;
  DELETE FROM public_tasks WHERE namespace = OLD.namespace AND id = OLD.id;
  DELETE FROM public_ready WHERE OLD.state = 'ready'
    AND namespace = OLD.namespace AND queue = OLD.queue AND run_at = OLD.run_at AND id = OLD.id;
END;

-- The public audit events of each namespace by id (ULIDs, so by time): the
-- activity feed walks this key instead of every event of the namespace,
-- which are mostly private reads. A partial index on audit_events would do
-- the same, but the meter charges every index on every audit row (an upper
-- bound, SPEC §14); this table costs a row only per public event.
CREATE TABLE public_events (
  namespace TEXT NOT NULL,
  id        TEXT NOT NULL,
  PRIMARY KEY (namespace, id)
) WITHOUT ROWID;

INSERT INTO public_events (namespace, id) SELECT namespace, id FROM audit_events WHERE public;

CREATE TRIGGER public_events_after_insert AFTER INSERT ON audit_events WHEN NEW.public
BEGIN
  INSERT INTO public_events (namespace, id) VALUES (NEW.namespace, NEW.id);
END;

-- Retention and namespace purges delete audit rows; their feed entries go
-- with them.
CREATE TRIGGER public_events_after_delete AFTER DELETE ON audit_events WHEN OLD.public
BEGIN
  DELETE FROM public_events WHERE namespace = OLD.namespace AND id = OLD.id;
END;
