package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// foreignKeysOff marks a migration (its first line) that rebuilds a table other tables
// refer to. SQLite ignores PRAGMA foreign_keys inside a transaction, so such a migration
// runs with foreign keys turned off on the write connection before it begins, and
// PRAGMA foreign_key_check must find nothing before it commits.
const foreignKeysOff = "-- mapyard:foreign-keys-off"

// migrate applies every embedded migration not yet recorded, in file-name order, each in
// its own transaction together with its record, so a crash never leaves one half applied.
func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at_ms INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := db.migrateFile(ctx, name); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return nil
}

func (db *DB) migrateFile(ctx context.Context, name string) (err error) {
	var n int
	if err := db.write.QueryRowContext(ctx, `SELECT COUNT(*) FROM migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return err
	} else if n != 0 {
		return nil // already applied
	}
	buf, err := fs.ReadFile(migrationFS, name)
	if err != nil {
		return err
	}
	conn, err := db.write.Conn(ctx) // the one write connection, pinned for the pragmas
	if err != nil {
		return err
	}
	defer conn.Close()
	fkOff := strings.HasPrefix(string(buf), foreignKeysOff)
	if fkOff {
		if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
			return err
		}
		defer func() {
			if _, e := conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`); e != nil {
				err = errors.Join(err, fmt.Errorf("foreign keys back on: %w", e))
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, string(buf)); err != nil {
		return err
	}
	if fkOff {
		if err := foreignKeyCheck(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (name, applied_at_ms) VALUES (?, ?)`, name, db.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}

// foreignKeyCheck fails if any row refers to a row that does not exist.
func foreignKeyCheck(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return fmt.Errorf("foreign key check: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fk int
		if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
			return fmt.Errorf("foreign key check: %w", err)
		}
		return fmt.Errorf("foreign key check: row %d of %s refers to a missing %s", rowid.Int64, table, parent)
	}
	return rows.Err()
}
