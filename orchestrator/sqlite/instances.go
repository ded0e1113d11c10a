package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
)

// PutInstance inserts or updates a wanted map instance. The creation time and restart
// count of an existing row are kept (see SetInstanceRestarts); its map, config, image
// and status are replaced.
func (db *DB) PutInstance(ctx context.Context, w orchestrator.WantedInstance) error {
	now := db.Now().UnixMilli()
	cfg := string(w.Config)
	if cfg == "" {
		cfg = "{}"
	}
	env, err := json.Marshal(append([]string{}, w.Env...))
	if err != nil {
		return fmt.Errorf("put map instance %q: %w", w.ID, err)
	}
	err = db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO map_instances (instance_id, map_id, config_json, image, env_json, status, created_at_ms, updated_at_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (instance_id) DO UPDATE SET
				map_id = excluded.map_id, config_json = excluded.config_json, image = excluded.image,
				env_json = excluded.env_json, status = excluded.status, updated_at_ms = excluded.updated_at_ms`,
			w.ID, w.MapID, cfg, w.Image, string(env), w.Status, now, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("put map instance %q: %w", w.ID, err)
	}
	return nil
}

// SetInstanceRestarts records that instance id has been restarted n times after a crash
// or failed health. The count only grows: a write that arrives after a later one (the
// supervisor writes in the background) leaves the larger count; a missing instance is
// not an error.
func (db *DB) SetInstanceRestarts(ctx context.Context, id string, n int) error {
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE map_instances SET restarts = max(restarts, ?) WHERE instance_id = ?`, n, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("set restarts of map instance %q: %w", id, err)
	}
	return nil
}

// DeleteInstance removes a wanted map instance; a missing one is not an error.
func (db *DB) DeleteInstance(ctx context.Context, id string) error {
	err := db.exec(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM map_instances WHERE instance_id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete map instance %q: %w", id, err)
	}
	return nil
}

// ListInstances returns every wanted map instance, ordered by id.
func (db *DB) ListInstances(ctx context.Context) ([]orchestrator.WantedInstance, error) {
	rows, err := db.read.QueryContext(ctx, `
		SELECT instance_id, map_id, config_json, image, env_json, status, restarts, created_at_ms, updated_at_ms
		FROM map_instances ORDER BY instance_id`)
	if err != nil {
		return nil, fmt.Errorf("list map instances: %w", err)
	}
	defer rows.Close()
	var out []orchestrator.WantedInstance
	for rows.Next() {
		var w orchestrator.WantedInstance
		var cfg, env string
		var created, updated int64
		if err := rows.Scan(&w.ID, &w.MapID, &cfg, &w.Image, &env, &w.Status, &w.Restarts, &created, &updated); err != nil {
			return nil, fmt.Errorf("list map instances: %w", err)
		}
		if err := json.Unmarshal([]byte(env), &w.Env); err != nil {
			return nil, fmt.Errorf("list map instances: env of %q: %w", w.ID, err)
		}
		if cfg != "{}" { // stored for "no config": the map runs its template
			w.Config = []byte(cfg)
		}
		w.CreatedAt, w.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list map instances: %w", err)
	}
	return out, nil
}
