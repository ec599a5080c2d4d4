-- Nearest neighbours read the other compiles of an entry's variant (issue 14): the live entries
-- of the same kernel, signature, tile shapes, num_warps and num_stages (`db/nearest.rs`).
-- Never edit once landed.
CREATE INDEX entries_variant ON entries(kernel, signature, shapes, num_warps, num_stages) WHERE removed_at IS NULL;
