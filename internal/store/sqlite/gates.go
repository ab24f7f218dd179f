package sqlite

import (
	"context"
	"fmt"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func (t *tx) GatesInsert(ctx context.Context, ns, taskID string, gates []tessera.Gate) error {
	for i := range gates {
		n, err := t.c.exec(ctx, sqlschema.GateInsert, sqlschema.GateArgs(ns, taskID, &gates[i])...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("gate %s of task %s: %w", gates[i].Key, taskID, store.ErrConflict)
		}
	}
	return nil
}

func (t *tx) GatesOf(ctx context.Context, ns, taskID string) ([]tessera.Gate, error) {
	var out []tessera.Gate
	err := t.c.query(ctx, sqlschema.GatesOf, []any{ns, taskID}, func(s *sqlite3.Stmt) error {
		var r sqlschema.GateRow
		for i, d := range r.Dest() {
			switch d := d.(type) {
			case *string:
				*d = s.ColumnText(i)
			case *int64:
				*d = s.ColumnInt64(i)
			}
		}
		out = append(out, r.Gate(ns, taskID))
		return nil
	})
	return out, err
}

func (t *tx) GateAnswer(ctx context.Context, ns, taskID, key string, a *tessera.GateAnswer) error {
	n, err := t.c.exec(ctx, sqlschema.GateAnswer, sqlschema.GateAnswerArgs(ns, taskID, key, a)...)
	if err == nil && n == 0 {
		return fmt.Errorf("gate %s of task %s: %w", key, taskID, store.ErrStale)
	}
	return err
}

func (t *tx) GatesTimingOut(ctx context.Context, limit int) ([]tessera.Gate, error) {
	var out []tessera.Gate
	err := t.c.query(ctx, sqlschema.GatesTimingOut, []any{limit}, func(s *sqlite3.Stmt) error {
		at := colTime(s, 3)
		out = append(out, tessera.Gate{Namespace: s.ColumnText(0), TaskID: s.ColumnText(1), Key: s.ColumnText(2), TimeoutAt: &at})
		return nil
	})
	return out, err
}
