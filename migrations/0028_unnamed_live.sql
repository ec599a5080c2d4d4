-- A machine's live entries without a kernel name, by kind (issue 14): a machine-pair report
-- reads them beside the kernels whose key sets differ (`db/keysets.rs::light_now_unnamed`), and
-- through `entries_listing` that read the table row of each unnamed entry to test its kind and
-- `removed_at`: a bench machine's 1,400 launchers, none of them wanted, 14 ms warm and 164 ms
-- cold a side, for every pair. Holds only those entries. Never edit once landed.
CREATE INDEX entries_unnamed_live ON entries(machine_id, kind) WHERE kernel IS NULL AND removed_at IS NULL;
