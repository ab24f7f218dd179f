-- Issue 28: a task's current run lives on its row. The claim wrote a run
-- row and the run's end updated it: two rows a run, beside the task row
-- both were already writing. Now the claim sets the run's columns on the
-- task and its end sets the ending; a run moves to the runs table only
-- when a later claim of the task starts the next one (the trigger below),
-- so the runs table holds the history of retried tasks, and a task done
-- at its first attempt writes no run row at all.
ALTER TABLE tasks ADD COLUMN run_id TEXT;
ALTER TABLE tasks ADD COLUMN run_holder TEXT;
ALTER TABLE tasks ADD COLUMN run_attempt INTEGER;
ALTER TABLE tasks ADD COLUMN run_started_at INTEGER;
ALTER TABLE tasks ADD COLUMN run_ended_at INTEGER;
ALTER TABLE tasks ADD COLUMN run_outcome TEXT;
ALTER TABLE tasks ADD COLUMN run_error TEXT;

-- Each task's last run (run ids grow with time) moves onto its row.
UPDATE tasks SET (run_id, run_holder, run_attempt, run_started_at, run_ended_at, run_outcome, run_error) = (
  SELECT run_id, holder, attempt, started_at, ended_at, outcome, error FROM runs r
  WHERE r.namespace = tasks.namespace AND r.task_id = tasks.id ORDER BY run_id DESC LIMIT 1);
DELETE FROM runs WHERE (namespace, task_id, run_id) IN (SELECT namespace, id, run_id FROM tasks WHERE run_id IS NOT NULL);

CREATE TRIGGER tasks_run_replaced AFTER UPDATE OF run_id ON tasks
WHEN OLD.run_id IS NOT NULL AND OLD.run_id IS NOT NEW.run_id
BEGIN
  INSERT INTO runs (namespace, task_id, run_id, holder, attempt, started_at, ended_at, outcome, error)
    VALUES (OLD.namespace, OLD.id, OLD.run_id, OLD.run_holder, OLD.run_attempt, OLD.run_started_at, OLD.run_ended_at,
      OLD.run_outcome, OLD.run_error);
END;
