"""The agents drover launches: the preset registry (presets.py), launching one in its own process
group with logs, timeouts and signs of life (launch.py), the environment it gets (environment.py),
its processes (procs.py), the locks that name the drover that launched it (locks.py), the usage
its structured output reports (usage.py), why a run failed (failures.py), and the subreaper that
ends what agents leave behind (reaping.py)."""
