"""``python -m dagspec.airflow.short_command ARGS``: Airflow's own CLI for one short-lived command.

``dagspec run`` starts ``airflow dags test`` through this module. The command, its arguments and
its output are Airflow's own. Two costs that are not Airflow's work are left out. Measured on
the 2-core machine with a 5-stage DAG whose checkpoints all hit: 8.4-8.7 s with the plain
``airflow`` command, 5.4-5.5 s through this module.

- **The cyclic garbage collector.** Building the in-process execution API (Cadwyn's versioned
  routers, at the first task) allocates a few hundred thousand objects. Collecting the young
  generation every 700 allocations traverses them again and again: 1.3 s of the 3.7 s it takes.
  A process that lives for one DAG run can collect rarely.
- **Interpreter teardown** (``dagspec.exits``): 1.8 s after the run has finished.
"""

from __future__ import annotations

import gc
import sys

from dagspec.airflow.noise import quiet_loggers
from dagspec.exits import exit_now, exit_status

# collect the young generation every 50,000 allocations instead of 700, the older ones rarely
YOUNG_THRESHOLD, OLDER_THRESHOLD = 50_000, 20


def run(argv: list[str]) -> int:
    """Airflow's CLI with ``argv``; returns its exit status."""
    gc.set_threshold(YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
    quiet_loggers()  # before Airflow loads its plugins (dag-factory logs at import)
    sys.argv = ["airflow", *argv]
    from airflow.__main__ import main as airflow_main

    try:
        airflow_main()  # type: ignore[no-untyped-call]  # Airflow's CLI entry has no annotations
    except SystemExit as exc:
        return exit_status(exc)
    return 0


if __name__ == "__main__":
    exit_now(run(sys.argv[1:]))
