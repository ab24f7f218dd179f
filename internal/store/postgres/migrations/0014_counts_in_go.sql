-- Issue 37: task counts are gathered by the store's own statements
-- (counts.go) and written with the transaction's COMMIT, in the same
-- round trip; the public tables are kept by the same statements. What
-- did it here — a statement trigger on every task insert and delete, a
-- row trigger on every change of state, a session temporary table, and
-- deferred triggers fired at commit — cost a fifth of PostgreSQL's CPU
-- per task. Two row triggers stay, whose WHEN clause costs nothing in the
-- common case: a run moved to the history when a task is claimed again
-- (0011), a public audit event's entry (0004).
DROP TRIGGER tasks_after_insert ON tasks;
DROP TRIGGER tasks_after_delete ON tasks;
DROP TRIGGER tasks_after_update ON tasks;
DROP TRIGGER tasks_counts_insert_delete ON tasks;
DROP TRIGGER tasks_counts_update ON tasks;
DROP FUNCTION tasks_inserted();
DROP FUNCTION tasks_deleted();
DROP FUNCTION tasks_updated();
DROP FUNCTION task_counts_flush();
DROP FUNCTION task_state_deltas_ensure();

-- Counted again from the tasks, once: a node of an older version that
-- kept running while this migration ran would have left its changes
-- uncounted until now (docs/operations.md: stop them first).
DELETE FROM task_counts;
INSERT INTO task_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting)
  SELECT namespace, queue, public, 0, count(*), count(*) FILTER (WHERE state = 'leased'), count(*) FILTER (WHERE state = 'paused'),
    count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'dead'), count(*) FILTER (WHERE state = 'canceled'),
    count(*) FILTER (WHERE state = 'waiting')
  FROM tasks GROUP BY namespace, queue, public;
