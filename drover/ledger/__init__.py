"""The ledger and what is decided from it: the SQLite store (db.py and one module per table group,
sqlite-utils writing every row), its schema (migrations.py), the writers' lock and journal, the
project (project.py), the catalogue of item files, an item's state (state.py), the journaled
writing commands (writes.py) and who each acts for (acting.py)."""
