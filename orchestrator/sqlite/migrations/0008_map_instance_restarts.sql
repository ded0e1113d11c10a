-- How many times the supervisor restarted each instance after a crash or failed health
-- (GET /admin/maps "restarts"): what an operator looks at after an incident, so it
-- outlives the orchestrator process that counted it.
ALTER TABLE map_instances ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
