"""The errors of the broken specs in pipelines/ (or $DAGSPEC_PIPELINES): this file's import error.

It compiles the same folder as ``dags/dagspec_pipelines.py`` and defines no DAG: when a spec is
broken, the stand-in DAG ``dagspec_invalid_specs`` fails Airflow's validation with every spec's
``file:line:col: field: problem`` (no traceback), which Airflow records as this file's import error
(Browse > Import errors, ``/api/v2/importErrors``). Airflow marks the DAGs of a file with an import
error stale, and this file has none, so one broken spec hides no other pipeline.
``ERRORS`` lists the spec errors for tools.
"""

from dagspec.airflow.compiler import compile_project

ERRORS = compile_project(__file__).register_errors()
