"""`memfarm`: the command line of the benchmark farm.

`root.py` holds the group and the context every command shares; each area's
commands live in their own module and register themselves on import: `run`
(run, submit), `farm` (the farm's runs and processes), `cluster` (a farm on one
machine), `results` (analyze, compare, score, rankings), `data` (synth,
extract-questions, convert), `sources` (ingest, recall), `bench` and `bench_systems`, `check` (check-system).
"""

# imported for their commands, which register themselves on `main`
from coordinator.cli import bench, bench_systems, check, cluster, data, datasets, farm, results, run, sources  # noqa: F401
from coordinator.cli.root import main, point_at_manual

point_at_manual(main)  # after every command has registered, so each one's --help names its manual page

__all__ = ["main"]
