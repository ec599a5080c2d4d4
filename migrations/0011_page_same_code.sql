-- Same machine code in the kernel grids (issue #12): entries whose code (a cubin's code and
-- kernel-info sections, an hsaco's .text and kernel descriptors: `resources_json.code_sha256`)
-- another live key of the kernel also has, byte-identical binaries included. Rebuilt with the
-- other summary tables.
ALTER TABLE page_variant_cells ADD COLUMN shared_code INTEGER NOT NULL DEFAULT 0;
ALTER TABLE page_kernel_identical ADD COLUMN same_code INTEGER NOT NULL DEFAULT 0;
