-- What other tools keep beside a scanned Triton cache dir (Inductor's FX graph and AOTAutograd
-- caches, vLLM's compiled graphs): a JSON list of {tool, path, files, bytes, complete}, NULL
-- for scans made before it was counted. The machine page reads the latest scan of each root.
ALTER TABLE scans ADD COLUMN beside_json TEXT;
CREATE INDEX scans_root_latest ON scans(machine_id, root, id);
