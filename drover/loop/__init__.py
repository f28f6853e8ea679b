"""The workflow: run, review and draft (runs.py), drive (drive.py), drover's own check before a
merge (verify.py), finish (finish.py), and `drover check` (checks.py)."""
