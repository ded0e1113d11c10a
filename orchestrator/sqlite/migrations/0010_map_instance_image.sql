-- The container image each wanted instance runs in, as its template or its admin create
-- named it; '' for the host's ORCH_MAP_IMAGE (read at every start, so such maps follow
-- the host's default image across upgrades). Kept with the instance, not looked up from
-- its template again, because a restart must run the image the map was created with.
ALTER TABLE map_instances ADD COLUMN image TEXT NOT NULL DEFAULT '';
