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
- **Execution API versions no client of this process speaks** (``dags test`` only). Cadwyn builds
  a router per API version at the first request: 2.2 s of a 5-stage run's 10 s, for nine
  versions of which the in-process client, from the same Airflow, speaks the newest alone. The
  app is built with the three newest (``newest_versions_only``): 0.8 s.
- **The first stage's client start.** Its Python and pyspark's Connect client (~0.7 s) are started
  here, before Airflow is imported, and wait for the stage (``client_process.start_first``).
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

from dagspec.airflow.noise import quiet_loggers
from dagspec.exits import exit_now, exit_status

# collect the young generation every 50,000 allocations instead of 700, the older ones rarely
YOUNG_THRESHOLD, OLDER_THRESHOLD = 50_000, 20


def run(argv: list[str]) -> int:
    """Airflow's CLI with ``argv``; returns its exit status."""
    gc.set_threshold(YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
    quiet_loggers()  # before Airflow loads its plugins (dag-factory logs at import)
    if argv[:2] == ["dags", "test"]:
        _start_first_client()
        newest_versions_only()
    sys.argv = ["airflow", *argv]
    from airflow.__main__ import main as airflow_main

    try:
        airflow_main()  # type: ignore[no-untyped-call]  # Airflow's CLI entry has no annotations
    except SystemExit as exc:
        return exit_status(exc)
    return 0


def _start_first_client() -> None:
    """The first stage's Connect client, importing while Airflow starts (``client_process.start_first``):
    the command the operator runs, ``<python> <home>/jobs/run_stage.py``."""
    home = os.environ.get("DAGSPEC_HOME")
    application = Path(home) / "jobs" / "run_stage.py" if home else None
    if application is not None and application.is_file():
        from dagspec.airflow.client_process import start_first

        start_first([sys.executable, str(application)], os.environ)


def newest_versions_only() -> bool:
    """Make the execution API that ``dags test`` builds in this process generate the routers of the
    newest API versions only, when the newest is the version its client sends (``airflow.sdk``'s
    ``API_VERSION``). Returns whether it did (anything unexpected: Airflow's bundle as it is).

    Kept, exactly as Airflow defines them: the newest versions down to the oldest that restores an
    endpoint (Cadwyn refuses a bundle where an endpoint marked as existing only in older versions
    is never restored), then the next version without its changes, the end of the bundle. Cadwyn
    binds a version change to one bundle; the kept ones are bound to the new bundle instead.
    """
    from airflow.api_fastapi.execution_api import versions
    from airflow.sdk.api.datamodels._generated import API_VERSION
    from cadwyn import HeadVersion, Version, VersionBundle
    from cadwyn.structure.endpoints import EndpointExistedInstruction

    dated = list(versions.bundle.versions)  # newest first
    if not dated or dated[0].value != API_VERSION:
        return False
    restoring = [
        i
        for i, version in enumerate(dated)
        if any(
            isinstance(ins, EndpointExistedInstruction)
            for ch in version.changes
            for ins in ch.alter_endpoint_instructions
        )
    ]
    kept = dated[: max(restoring, default=0) + 1]
    if len(kept) + 1 >= len(dated):
        return False
    changes = [change for version in kept for change in version.changes]
    bound = [change._bound_version_bundle for change in changes]
    try:
        for change in changes:
            change._bound_version_bundle = None
        versions.bundle = VersionBundle(HeadVersion(), *kept, Version(dated[len(kept)].value))
    except Exception:  # another Cadwyn: Airflow's bundle, bound as it was
        for change, bundle in zip(changes, bound, strict=True):
            change._bound_version_bundle = bundle
        return False
    return True


if __name__ == "__main__":
    exit_now(run(sys.argv[1:]))
