package sqlite

import (
	"context"
	"encoding/json"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
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
	_, err = t.c.exec(ctx, sqlschema.DependencyPut, ns, taskID, string(parents), string(settled), d.WaitingOn, d.OnParentFailure,
		nullable(d.FailedParent), nullable(d.CanceledBy))
	return err
}

func (t *tx) DependencyGet(ctx context.Context, ns, taskID string) (*tessera.Dependency, error) {
	var d tessera.Dependency
	err := t.one(ctx, sqlschema.DependencyGet, []any{ns, taskID}, func(s *sqlite3.Stmt) error {
		d.WaitingOn, d.OnParentFailure = s.ColumnInt(2), s.ColumnText(3)
		d.FailedParent, d.CanceledBy = s.ColumnText(4), s.ColumnText(5)
		if err := json.Unmarshal([]byte(s.ColumnText(0)), &d.After); err != nil {
			return err
		}
		return json.Unmarshal([]byte(s.ColumnText(1)), &d.Settled)
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func (t *tx) DependencyEdgesAdd(ctx context.Context, ns, child string, parents []string) error {
	for _, p := range parents {
		if _, err := t.c.exec(ctx, sqlschema.DependencyEdgeAdd, ns, p, child); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) DependencyChildren(ctx context.Context, ns, parent, after string, limit int) ([]string, error) {
	var out []string
	err := t.c.query(ctx, sqlschema.DependencyChildren, []any{ns, parent, after, limit}, func(s *sqlite3.Stmt) error {
		out = append(out, s.ColumnText(0))
		return nil
	})
	return out, err
}

func (t *tx) DependencyParents(ctx context.Context, ns string, ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		err := t.c.query(ctx, sqlschema.DependencyIsParent, []any{ns, id}, func(*sqlite3.Stmt) error {
			out = append(out, id)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *tx) CheckpointPut(ctx context.Context, ns, taskID string, c *tessera.Checkpoint) error {
	_, err := t.c.exec(ctx, sqlschema.CheckpointPut, ns, taskID, c.RunID, c.Attempt, ms(c.At), string(c.Value))
	return err
}

func (t *tx) CheckpointGet(ctx context.Context, ns, taskID string) (*tessera.Checkpoint, error) {
	var c tessera.Checkpoint
	err := t.one(ctx, sqlschema.CheckpointGet, []any{ns, taskID}, func(s *sqlite3.Stmt) error {
		c.RunID, c.Attempt, c.At, c.Value = s.ColumnText(0), s.ColumnInt(1), colTime(s, 2), json.RawMessage(s.ColumnText(3))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func (t *tx) DepWorkPut(ctx context.Context, w *store.DepWork) error {
	_, err := t.c.exec(ctx, sqlschema.DepWorkPut, w.Namespace, w.Parent, w.Kind, w.After)
	return err
}

func (t *tx) DepWorkList(ctx context.Context, limit int) ([]store.DepWork, error) {
	var out []store.DepWork
	err := t.c.query(ctx, sqlschema.DepWorkList, []any{limit}, func(s *sqlite3.Stmt) error {
		out = append(out, store.DepWork{Seq: s.ColumnInt64(0), Namespace: s.ColumnText(1), Parent: s.ColumnText(2),
			Kind: s.ColumnText(3), After: s.ColumnText(4)})
		return nil
	})
	return out, err
}

func (t *tx) DepWorkAdvance(ctx context.Context, w *store.DepWork, after string, done bool) error {
	var n int64
	var err error
	if done {
		n, err = t.c.exec(ctx, sqlschema.DepWorkDone, w.Namespace, w.Parent, w.Kind, w.After)
	} else {
		n, err = t.c.exec(ctx, sqlschema.DepWorkAdvance, after, w.Namespace, w.Parent, w.Kind, w.After)
	}
	if err == nil && n == 0 {
		return store.ErrStale
	}
	return err
}
