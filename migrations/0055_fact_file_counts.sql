-- How many files a fact holds and how many of them are group files (`__grp__*`), kept on the
-- fact when it is stored (`db::ingest::store_facts`: a fact names its files, so every entry of
-- it holds the same ones). Prune's advice reads them for every live entry of a machine after
-- each landing; counting them in `fact_files` there (a range of text keys and a GLOB a file)
-- was half of the advice's query: 0.52 of 0.98 s at 100,000 entries (issue 17).
-- Never edit once landed.
ALTER TABLE facts ADD COLUMN files INTEGER NOT NULL DEFAULT 0;
ALTER TABLE facts ADD COLUMN group_files INTEGER NOT NULL DEFAULT 0;
UPDATE facts SET (files, group_files) = (
    SELECT COUNT(*), COALESCE(SUM(ff.name GLOB '__grp__*'), 0) FROM fact_files ff WHERE ff.fact = facts.fact)
WHERE EXISTS (SELECT 1 FROM fact_files ff WHERE ff.fact = facts.fact);
