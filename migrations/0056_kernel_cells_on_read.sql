-- A kernel's variants grid and its shared-binary figures are read at request time from the
-- kernel's live facts and their counters (backend/db/kernel_cells.sql: fact_live's live count and
-- machine-code digest, variant_machines), not kept per kernel: a node whose entries the fleet
-- already holds adds presence to known facts, and keeping the cells made every such landing sum
-- again every live fact of every kernel it touched. The tables that held them go.
DROP TABLE page_variant_cells;
DROP TABLE page_kernel_identical;
