-- The MAP_FAULT_* variables a test's admin create gave an instance
-- (ORCH_ALLOW_FAULT_INJECTION=1), as a JSON array; '[]' for every other instance. Kept
-- with the instance, so that a restart after an orchestrator restart runs the map with
-- the same switches as before.
ALTER TABLE map_instances ADD COLUMN env_json TEXT NOT NULL DEFAULT '[]';
