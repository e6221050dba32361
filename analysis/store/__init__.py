"""The results store (docs/results-store.md): where it is (place.py), its tables and version
(schema.py), what it keeps of a sweep (rows.py), adds and reads (database.py), the report's
add beside its tables (keeper.py), the `store` and `archive` commands (commands.py), and each
configuration across sweeps (history.py)."""
