"""Third-party noise kept out of the head of run logs and task logs.

Every Airflow process dagspec starts (``dagspec run``'s ``airflow dags test``, ``dagspec airflow
up``'s servers and their task processes, plain ``airflow`` after ``source .dagspec/env``) used to
open its log with lines that are nobody's business who runs a pipeline: a graphviz warning (only
``airflow dags show`` renders graphs), deprecation warnings from dag-factory (installed for the
benchmarks in ``bench/``, loaded by Airflow as a plugin) and the standard provider it imports, a
Starlette deprecation from the in-process execution API of ``dags test``, and dag-factory's
``Package apache-airflow-providers-http is not installed``. Each filter matches one message or
one third-party module, so a stage's own warnings and every real error still print.
"""

from __future__ import annotations

import logging

# -W filters (``action:message:category:module``): a message matches from its start, a module
# exactly; no category names, so no module is imported to read them at interpreter start
IGNORED_WARNINGS = (
    "ignore:Could not import graphviz",  # airflow's CLI, at the import of its dags commands
    "ignore:Using `httpx` with `starlette.testclient`",  # the execution API `dags test` runs in-process
    "ignore:::dagfactory.dagbuilder",  # dag-factory imports operators Airflow 3 moved
    "ignore:::airflow.providers.standard.sensors.python",  # imported by dag-factory, same deprecation
)
# loggers that say at INFO what only matters to their own users
QUIET_LOGGERS = ("dagfactory",)


def python_warnings(existing: str | None) -> str:
    """``PYTHONWARNINGS`` with dagspec's filters first: the user's own, later, take precedence."""
    own = [part for part in (existing or "").split(",") if part and part not in IGNORED_WARNINGS]
    return ",".join([*IGNORED_WARNINGS, *own])


def quiet_loggers() -> None:
    """Raise the third-party loggers of ``QUIET_LOGGERS`` to WARNING (their warnings still print)."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
