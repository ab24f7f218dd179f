package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The shared statements with PostgreSQL's numbered placeholders.
var (
	depPut         = sqlschema.Numbered1(sqlschema.DependencyPut)
	depGet         = sqlschema.Numbered1(sqlschema.DependencyGet)
	depEdgeAdd     = sqlschema.Numbered1(sqlschema.DependencyEdgeAdd)
	depChildren    = sqlschema.Numbered1(sqlschema.DependencyChildren)
	checkpointPut  = sqlschema.Numbered1(sqlschema.CheckpointPut)
	checkpointGet  = sqlschema.Numbered1(sqlschema.CheckpointGet)
	depWorkPut     = sqlschema.Numbered1(sqlschema.DepWorkPut)
	depWorkList    = sqlschema.Numbered1(sqlschema.DepWorkList)
	depWorkAdvance = sqlschema.Numbered1(sqlschema.DepWorkAdvance)
	depWorkDone    = sqlschema.Numbered1(sqlschema.DepWorkDone)
)

func (t *tx) DependencyPut(ctx context.Context, ns, taskID string, d *tessera.Dependency) error {
	parents, err := json.Marshal(d.After)
	if err != nil {
		return err
	}
	settled, err := json.Marshal(d.Settled)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, depPut, ns, taskID, string(parents), string(settled), d.WaitingOn, d.OnParentFailure,
		nullable(d.FailedParent), nullable(d.CanceledBy))
	return err
}

func (t *tx) DependencyGet(ctx context.Context, ns, taskID string) (*tessera.Dependency, error) {
	var d tessera.Dependency
	var parents, settled string
	if err := t.one(ctx, depGet, []any{ns, taskID}, &parents, &settled, &d.WaitingOn, &d.OnParentFailure, &d.FailedParent, &d.CanceledBy); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(parents), &d.After); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(settled), &d.Settled); err != nil {
		return nil, err
	}
	return &d, nil
}

func (t *tx) DependencyEdgesAdd(ctx context.Context, ns, child string, parents []string) error {
	for _, p := range parents {
		if _, err := t.exec(ctx, depEdgeAdd, ns, p, child); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) DependencyChildren(ctx context.Context, ns, parent, after string, limit int) ([]string, error) {
	var out []string
	err := t.query(ctx, depChildren, []any{ns, parent, after, limit}, func(rows pgx.Rows) error {
		var id string
		err := rows.Scan(&id)
		out = append(out, id)
		return err
	})
	return out, err
}

// depParentsSQL probes the edge index once per id, reading no edge
// beyond the first a parent has.
const depParentsSQL = `SELECT p FROM unnest($2::text[]) AS p
 WHERE EXISTS (SELECT 1 FROM task_edges WHERE namespace = $1 AND parent_id = p)`

func (t *tx) DependencyParents(ctx context.Context, ns string, ids []string) ([]string, error) {
	var out []string
	err := t.query(ctx, depParentsSQL, []any{ns, ids}, func(rows pgx.Rows) error {
		var id string
		err := rows.Scan(&id)
		out = append(out, id)
		return err
	})
	return out, err
}

func (t *tx) CheckpointPut(ctx context.Context, ns, taskID string, c *tessera.Checkpoint) error {
	_, err := t.exec(ctx, checkpointPut, ns, taskID, c.RunID, c.Attempt, ms(c.At), string(c.Value))
	return err
}

func (t *tx) CheckpointGet(ctx context.Context, ns, taskID string) (*tessera.Checkpoint, error) {
	var c tessera.Checkpoint
	var at int64
	var value string
	if err := t.one(ctx, checkpointGet, []any{ns, taskID}, &c.RunID, &c.Attempt, &at, &value); err != nil {
		return nil, err
	}
	c.At, c.Value = fromMS(at), json.RawMessage(value)
	return &c, nil
}

func (t *tx) DepWorkPut(ctx context.Context, w *store.DepWork) error {
	_, err := t.exec(ctx, depWorkPut, w.Namespace, w.Parent, w.Kind, w.After)
	return err
}

func (t *tx) DepWorkList(ctx context.Context, limit int) ([]store.DepWork, error) {
	var out []store.DepWork
	err := t.query(ctx, depWorkList, []any{limit}, func(rows pgx.Rows) error {
		var w store.DepWork
		err := rows.Scan(&w.Seq, &w.Namespace, &w.Parent, &w.Kind, &w.After)
		out = append(out, w)
		return err
	})
	return out, err
}

func (t *tx) DepWorkAdvance(ctx context.Context, w *store.DepWork, after string, done bool) error {
	var n int64
	var err error
	if done {
		n, err = t.exec(ctx, depWorkDone, w.Namespace, w.Parent, w.Kind, w.After)
	} else {
		n, err = t.exec(ctx, depWorkAdvance, after, w.Namespace, w.Parent, w.Kind, w.After)
	}
	if err == nil && n == 0 {
		return store.ErrStale
	}
	return err
}
