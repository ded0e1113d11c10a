-- The last critical event that changed each item (moved it, recovered it, used it up),
-- for operators asking who holds an item and since when (GET /admin/items). NULL for an
-- item only seeded by its map. Items changed before this migration get theirs from the
-- events already recorded: the item an item event moves, and the items a trade gives
-- back.
ALTER TABLE inventory_items ADD COLUMN last_event_seq INTEGER REFERENCES critical_events (seq);

WITH item_events (payload, seq) AS (
	SELECT CAST(payload AS TEXT), seq FROM critical_events
	WHERE kind IN ('item_pickup', 'item_drop', 'item_trade', 'item_consume', 'item_recover')
		AND json_valid(CAST(payload AS TEXT))
), touched (item_id, seq) AS (
	SELECT json_extract(payload, '$.itemId'), seq FROM item_events
	UNION ALL
	SELECT json_extract(x.value, '$.itemId'), e.seq FROM item_events e, json_each(e.payload, '$.exchange') x
), last (item_id, seq) AS (
	SELECT item_id, max(seq) FROM touched WHERE item_id IS NOT NULL GROUP BY item_id
)
UPDATE inventory_items SET last_event_seq = last.seq FROM last WHERE last.item_id = inventory_items.item_id;
