-- The machine-code digest of each named kernel's fact (`resources.code_sha256`), kept on its
-- counter row (`fact_live.code`) when the fact is made, so that a summary update does not parse
-- every live fact's resources JSON again to find which keys share code (issue 17). A fact is
-- content: the digest of its first texts is the digest of all of them (it is the binary's). The
-- fact's texts are written before the fact (`db/ingest.rs`), so its trigger finds them.
-- Never edit once landed.
ALTER TABLE fact_live ADD COLUMN code TEXT;
UPDATE fact_live SET code = (
    SELECT json_extract(COALESCE(f.resources_json, (SELECT t.resources_json FROM fact_texts t WHERE t.fact = f.fact
                                                    ORDER BY t.relocated LIMIT 1)), '$.code_sha256')
    FROM facts f WHERE f.id = fact_live.fact_id)
WHERE variant_id IS NOT NULL;

DROP TRIGGER fact_live_fact_insert;
CREATE TRIGGER fact_live_fact_insert AFTER INSERT ON facts BEGIN
    INSERT INTO variants(cell, kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind)
        SELECT json_array(NEW.kernel, NEW.backend, NEW.arch, NEW.triton_version, NEW.signature, NEW.shapes,
                          NEW.num_warps, NEW.num_stages, k),
               NEW.kernel, NEW.backend, NEW.arch, NEW.triton_version, NEW.signature, NEW.shapes,
               NEW.num_warps, NEW.num_stages, k
        FROM (SELECT CASE WHEN NEW.num_warps IS NULL AND NEW.num_stages IS NULL THEN NEW.kind ELSE '' END AS k)
        WHERE NEW.kernel IS NOT NULL
        ON CONFLICT(cell) DO NOTHING;
    INSERT INTO fact_live(fact_id, variant_id, live, code)
        VALUES (NEW.id,
                (SELECT id FROM variants
                 WHERE cell = json_array(NEW.kernel, NEW.backend, NEW.arch, NEW.triton_version, NEW.signature,
                                         NEW.shapes, NEW.num_warps, NEW.num_stages,
                                         CASE WHEN NEW.num_warps IS NULL AND NEW.num_stages IS NULL
                                              THEN NEW.kind ELSE '' END)),
                0,
                CASE WHEN NEW.kernel IS NOT NULL THEN
                    json_extract(COALESCE(NEW.resources_json,
                                          (SELECT t.resources_json FROM fact_texts t WHERE t.fact = NEW.fact
                                           ORDER BY t.relocated LIMIT 1)), '$.code_sha256')
                END);
END;
