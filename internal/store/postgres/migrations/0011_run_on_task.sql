-- Issue 28: SQLite's 0010. A task's current run lives on its row; a run
-- moves to the runs table only when a later claim of the task starts the
-- next one, so a task done at its first attempt writes no run row.
ALTER TABLE tasks ADD COLUMN run_id TEXT COLLATE "C";
ALTER TABLE tasks ADD COLUMN run_holder TEXT;
ALTER TABLE tasks ADD COLUMN run_attempt INTEGER;
ALTER TABLE tasks ADD COLUMN run_started_at BIGINT;
ALTER TABLE tasks ADD COLUMN run_ended_at BIGINT;
ALTER TABLE tasks ADD COLUMN run_outcome TEXT;
ALTER TABLE tasks ADD COLUMN run_error TEXT;

UPDATE tasks t SET run_id = r.run_id, run_holder = r.holder, run_attempt = r.attempt, run_started_at = r.started_at,
    run_ended_at = r.ended_at, run_outcome = r.outcome, run_error = r.error
  FROM (SELECT DISTINCT ON (namespace, task_id) * FROM runs ORDER BY namespace, task_id, run_id DESC) r
  WHERE r.namespace = t.namespace AND r.task_id = t.id;
DELETE FROM runs r USING tasks t WHERE t.namespace = r.namespace AND t.id = r.task_id AND t.run_id = r.run_id;

CREATE FUNCTION tasks_run_replaced() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO runs (namespace, task_id, run_id, holder, attempt, started_at, ended_at, outcome, error)
    VALUES (OLD.namespace, OLD.id, OLD.run_id, OLD.run_holder, OLD.run_attempt, OLD.run_started_at, OLD.run_ended_at,
      OLD.run_outcome, OLD.run_error);
  RETURN NULL;
END $$;

CREATE TRIGGER tasks_run_replaced AFTER UPDATE OF run_id ON tasks
  FOR EACH ROW WHEN (OLD.run_id IS NOT NULL AND OLD.run_id IS DISTINCT FROM NEW.run_id)
  EXECUTE FUNCTION tasks_run_replaced();
