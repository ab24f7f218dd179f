package postgres

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The storage meter's count of a transaction (SPEC §14), made from what
// each statement reports — rows returned, rows changed (RowsAffected),
// an upsert's RETURNING (xmax = 0) — weighed by the shape of the table it
// wrote, as the catalog has it. PostgreSQL's own per-transaction counters
// (pg_stat_get_xact_*) would tell the same and more, but reading them for
// every table of the schema at a transaction's start and end cost a
// quarter of PostgreSQL's CPU per task (issue 37); this costs nothing on
// the server. The rules:
//
//   - rows written: an inserted or deleted row is one, plus one per index
//     of its table (partial ones too, an upper bound as in SQLite); an
//     updated row is one when the update leaves every indexed column alone
//     (a HOT update: no index entry is written), else as an insert;
//   - rows read: the rows a query returned (none for one that names no
//     table: a lock, a notification); the rows an UPDATE or DELETE
//     changed, twice when the statement found them with a query of its own
//     (a claim's pick, a purge's page); the existing row an insert ran
//     into (ON CONFLICT);
//   - a RETURNING clause's rows are the written rows, not read again (an
//     upsert that returns columns of its own is counted as an update).
//
// Where it differs from the counters: index entries a scan walks past
// without returning a row (dead versions not yet vacuumed, rows a filter
// or SKIP LOCKED drops) are not counted, an aggregate counts the rows it
// returns (but a count(*) the rows it counted: tx.countRows), and an
// update is judged HOT by its columns, not by whether its page had room.
// TestStatementMeterAgrees holds the two side by side.

// tableShape is what the meter knows of one table.
type tableShape struct {
	indexes int
	// indexed are the columns some index holds: in its key, an
	// expression or its predicate. An update that sets none is HOT.
	indexed map[string]bool
}

// shapes are the schema's tables by name.
type shapes map[string]tableShape

// readShapes reads the tables of the schema and their indexes from the
// catalog, once at start (a migration run later by another node is seen
// at the next start).
func readShapes(ctx context.Context, pool *pgxpool.Pool) (shapes, error) {
	rows, err := pool.Query(ctx, `SELECT c.relname::text,
   array(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
   array(SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = c.oid)
 FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := shapes{}
	for rows.Next() {
		var table string
		var cols, defs []string
		if err := rows.Scan(&table, &cols, &defs); err != nil {
			return nil, err
		}
		s := tableShape{indexes: len(defs), indexed: map[string]bool{}}
		for _, def := range defs {
			// What follows the table's name: the key, then any predicate.
			_, def, _ = strings.Cut(def, " USING ")
			words := map[string]bool{}
			for _, w := range identifier.FindAllString(def, -1) {
				words[w] = true
			}
			for _, c := range cols {
				if words[c] {
					s.indexed[c] = true
				}
			}
		}
		out[table] = s
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("the schema has no tables")
	}
	return out, nil
}

var identifier = regexp.MustCompile(`[a-z_][a-z0-9_]*`)

// cost is how one statement's results turn into rows.
type cost struct {
	table string // the table written; "" for a read
	verb  byte   // 'S', 'I', 'U', 'D'
	// perRow are the rows written per row changed; upsertPerRow those of
	// an upsert's update.
	perRow, upsertPerRow int64
	// readsPerRow are the rows read per row a query returned (0 for one
	// that reads no table) or an UPDATE or DELETE changed.
	readsPerRow int64
	// upsert: INSERT … ON CONFLICT DO UPDATE. Sent with RETURNING
	// (xmax = 0) added, which tells an inserted row (true) from an
	// updated one.
	upsert bool
	// oneRow: an INSERT of one VALUES row, whose conflict is a row read.
	oneRow bool
}

var (
	insertInto = regexp.MustCompile(`(?is)\bINSERT\s+INTO\s+(\w+)`)
	updateSet  = regexp.MustCompile(`(?is)\bUPDATE\s+(\w+)\s+SET\b(.*?)(?:\bFROM\b|\bWHERE\b|\bRETURNING\b|$)`)
	deleteFrom = regexp.MustCompile(`(?is)\bDELETE\s+FROM\s+(\w+)`)
	doUpdate   = regexp.MustCompile(`(?is)\bON\s+CONFLICT\b.*?\bDO\s+UPDATE\s+SET\b(.*?)(?:\bWHERE\b|\bRETURNING\b|$)`)
	setColumn  = regexp.MustCompile(`(?:^|,)\s*(\w+)\s*=`)
	returning  = regexp.MustCompile(`(?i)\bRETURNING\b`)
	// picks: a query of the statement's own over a table (not unnest).
	picks = regexp.MustCompile(`(?is)\bSELECT\b.*?\bFROM\s+(\w+)`)
	// tableNamed: a table a query reads.
	tableNamed = regexp.MustCompile(`(?is)\b(?:FROM|JOIN)\s+(\w+)`)
)

// costs caches each statement's cost by its text.
type costs struct {
	shapes shapes
	known  sync.Map // string → *cost
}

// of is the cost of sql.
func (c *costs) of(sql string) *cost {
	if v, ok := c.known.Load(sql); ok {
		return v.(*cost)
	}
	k := c.parse(sql)
	c.known.Store(sql, k)
	return k
}

func (c *costs) parse(sql string) *cost {
	k := &cost{verb: 'S', readsPerRow: 1}
	switch {
	case insertInto.MatchString(sql):
		k.verb, k.table = 'I', insertInto.FindStringSubmatch(sql)[1]
		k.upsert = doUpdate.MatchString(sql)
		k.oneRow = strings.Contains(strings.ToUpper(sql), " VALUES ") && !picks.MatchString(sql)
		if k.upsert {
			k.upsertPerRow = c.written(k.table, doUpdate.FindStringSubmatch(sql)[1])
		}
		if k.upsert && returning.MatchString(sql) {
			// Its rows are the caller's: counted as the update it
			// mostly is (a bucket's settings written again).
			k.verb, k.upsert, k.perRow = 'U', false, k.upsertPerRow
			return k
		}
	case updateSet.MatchString(sql):
		m := updateSet.FindStringSubmatch(sql)
		k.verb, k.table = 'U', m[1]
		k.perRow = c.written(k.table, m[2])
	case deleteFrom.MatchString(sql):
		k.verb, k.table = 'D', deleteFrom.FindStringSubmatch(sql)[1]
	}
	if k.verb != 'U' {
		k.perRow = 1 + int64(c.shapes[k.table].indexes)
	}
	if (k.verb == 'U' || k.verb == 'D') && c.picksItself(sql) {
		k.readsPerRow = 2
	}
	if k.verb == 'S' && !c.readsTable(sql) {
		k.readsPerRow = 0 // a lock taken, a notification sent: no row read
	}
	return k
}

// readsTable reports whether a query names a table of the schema.
func (c *costs) readsTable(sql string) bool {
	for _, m := range tableNamed.FindAllStringSubmatch(sql, -1) {
		if _, ok := c.shapes[m[1]]; ok {
			return true
		}
	}
	return false
}

// picksItself reports whether a write finds its rows with a query of its
// own over a table of the schema.
func (c *costs) picksItself(sql string) bool {
	for _, m := range picks.FindAllStringSubmatch(sql, -1) {
		if _, ok := c.shapes[m[1]]; ok {
			return true
		}
	}
	return false
}

// written are the rows an update that sets the columns of set writes per
// row: one, plus every index when it sets an indexed column.
func (c *costs) written(table, set string) int64 {
	s := c.shapes[table]
	for _, m := range setColumn.FindAllStringSubmatch(set, -1) {
		if s.indexed[m[1]] {
			return 1 + int64(s.indexes)
		}
	}
	return 1
}

// returningInserted is what an upsert is sent with, so its rows tell
// whether they were inserted or updated.
const returningInserted = ` RETURNING (xmax = 0)`

// sent is the text an upsert without RETURNING is sent as.
func (k *cost) sent(sql string) string {
	if k.upsert {
		return sql + returningInserted
	}
	return sql
}

// tally is a transaction's count so far.
type tally struct{ written, read int64 }

// returned counts the rows a statement of cost k returned, or (a write
// without RETURNING) changed.
func (t *tally) returned(k *cost, n int64) {
	switch k.verb {
	case 'S':
		t.read += n * k.readsPerRow
	case 'I':
		t.written += n * k.perRow
	default:
		t.written += n * k.perRow
		t.read += n * k.readsPerRow
	}
}

// unreported counts rows inserted or deleted in table that no statement
// reports: what two triggers write (migrations 0004 and 0011: a run moved
// to the history, a public event's entry), and what a COPY wrote.
func (t *tally) unreported(s shapes, table string, rows int64) {
	t.written += rows * (1 + int64(s[table].indexes))
}

// upserted counts an upsert's rows: inserted and updated.
func (t *tally) upserted(k *cost, inserted, updated int64) {
	t.written += inserted*k.perRow + updated*k.upsertPerRow
	t.read += updated
}

// conflicted counts an insert of one row that ran into an existing row
// and changed nothing.
func (t *tally) conflicted(k *cost, changed int64) {
	if k.oneRow && changed == 0 {
		t.read++
	}
}
