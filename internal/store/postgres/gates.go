package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The shared statements with PostgreSQL's numbered placeholders.
var (
	gateInsert     = sqlschema.Numbered1(sqlschema.GateInsert)
	gatesOf        = sqlschema.Numbered1(sqlschema.GatesOf)
	gateAnswer     = sqlschema.Numbered1(sqlschema.GateAnswer)
	gatesTimingOut = sqlschema.Numbered1(sqlschema.GatesTimingOut)
)

func (t *tx) GatesInsert(ctx context.Context, ns, taskID string, gates []tessera.Gate) error {
	for i := range gates {
		n, err := t.exec(ctx, gateInsert, sqlschema.GateArgs(ns, taskID, &gates[i])...)
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
	err := t.query(ctx, gatesOf, []any{ns, taskID}, func(rows pgx.Rows) error {
		var r sqlschema.GateRow
		err := rows.Scan(r.Dest()...)
		out = append(out, r.Gate(ns, taskID))
		return err
	})
	return out, err
}

func (t *tx) GateAnswer(ctx context.Context, ns, taskID, key string, a *tessera.GateAnswer) error {
	n, err := t.exec(ctx, gateAnswer, sqlschema.GateAnswerArgs(ns, taskID, key, a)...)
	if err == nil && n == 0 {
		return fmt.Errorf("gate %s of task %s: %w", key, taskID, store.ErrStale)
	}
	return err
}

func (t *tx) GatesTimingOut(ctx context.Context, limit int) ([]tessera.Gate, error) {
	var out []tessera.Gate
	err := t.query(ctx, gatesTimingOut, []any{limit}, func(rows pgx.Rows) error {
		var g tessera.Gate
		var at int64
		err := rows.Scan(&g.Namespace, &g.TaskID, &g.Key, &at)
		due := fromMS(at)
		g.TimeoutAt = &due
		out = append(out, g)
		return err
	})
	return out, err
}
