"""The workflow: run, review and draft (runs.py) and a review's verdict (verdict.py), drive (drive.py,
one item's loop in driver.py), drover's own check before a merge (verify.py), finish (finish.py), and
`drover check` (checks.py)."""
