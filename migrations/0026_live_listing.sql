-- `/api/v1/entries` (live entries, the default), in its order, live entries only (issue 14).
-- Never edit once landed.
--
-- With `entries_listing` a page past `offset` rows read each skipped entry's table row to test
-- `removed_at` (it sits past the row's JSON columns): offset 49,900 of a 50,000-entry machine
-- took 0.14 s, 100,000 into the fleet 0.2 s. This index holds the live entries alone, so
-- skipping is a walk of index rows (100,000 in ~8 ms). Built once here (~2 s for 350,000
-- entries on the dev machine).
CREATE INDEX entries_listing_live ON entries(machine_id, kernel, num_warps, num_stages, key) WHERE removed_at IS NULL;
