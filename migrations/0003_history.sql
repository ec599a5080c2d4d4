-- History: find the hook's compile events of an entry's key (an entry whose compile the hook
-- saw is not inferred again from its mtime), and pair each compile with the lookup before it.
CREATE INDEX events_machine_key ON events(machine_id, key, event);
