-- Map instances the orchestrator wants to run. The MapConfig is kept as the JSON the
-- map server receives; everything the orchestrator queries on has its own column.
CREATE TABLE map_instances (
	instance_id   TEXT PRIMARY KEY,
	map_id        TEXT NOT NULL,
	config_json   TEXT NOT NULL DEFAULT '{}',
	status        TEXT NOT NULL,
	created_at_ms INTEGER NOT NULL,
	updated_at_ms INTEGER NOT NULL
);
