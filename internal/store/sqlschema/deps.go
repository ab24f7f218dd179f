package sqlschema

// The statements of task dependencies and checkpoints (store.DepTx), the
// same on both backends.
const (
	DependencyPut = `INSERT INTO task_dependencies (namespace, task_id, parents, settled, waiting_on, on_parent_failure, failed_parent, canceled_by)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?)
 ON CONFLICT (namespace, task_id) DO UPDATE SET parents = excluded.parents, settled = excluded.settled, waiting_on = excluded.waiting_on,
 on_parent_failure = excluded.on_parent_failure, failed_parent = excluded.failed_parent, canceled_by = excluded.canceled_by`
	DependencyGet = `SELECT parents, settled, waiting_on, on_parent_failure, coalesce(failed_parent, ''), coalesce(canceled_by, '')
 FROM task_dependencies WHERE namespace = ? AND task_id = ?`
	DependencyEdgeAdd  = `INSERT INTO task_edges (namespace, parent_id, child_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`
	DependencyChildren = `SELECT child_id FROM task_edges WHERE namespace = ? AND parent_id = ? AND child_id > ? ORDER BY child_id LIMIT ?`
	DependencyIsParent = `SELECT 1 FROM task_edges WHERE namespace = ? AND parent_id = ? LIMIT 1`

	CheckpointPut = `INSERT INTO task_checkpoints (namespace, task_id, run_id, attempt, at, value) VALUES (?, ?, ?, ?, ?, ?)
 ON CONFLICT (namespace, task_id) DO UPDATE SET run_id = excluded.run_id, attempt = excluded.attempt, at = excluded.at, value = excluded.value`
	CheckpointGet = `SELECT run_id, attempt, at, value FROM task_checkpoints WHERE namespace = ? AND task_id = ?`

	DepWorkPut = `INSERT INTO dep_work (namespace, parent_id, kind, cursor) VALUES (?, ?, ?, ?)
 ON CONFLICT (namespace, parent_id, kind) DO UPDATE SET cursor = excluded.cursor`
	DepWorkList    = `SELECT seq, namespace, parent_id, kind, cursor FROM dep_work ORDER BY seq LIMIT ?`
	DepWorkAdvance = `UPDATE dep_work SET cursor = ? WHERE namespace = ? AND parent_id = ? AND kind = ? AND cursor = ?`
	DepWorkDone    = `DELETE FROM dep_work WHERE namespace = ? AND parent_id = ? AND kind = ? AND cursor = ?`
)
