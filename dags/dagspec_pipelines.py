"""Compile every spec in pipelines/ (or $DAGSPEC_PIPELINES) into an Airflow DAG.

Only the specs that compile are defined here; this file reports no spec error. Airflow marks every
DAG of a file with an import error stale (hidden from the UI and the REST API, never scheduled),
so the broken specs' errors are the import error of the file beside this one,
``dags/dagspec_spec_errors.py``, which defines no DAG. The DAGs are registered with Airflow by the
compiler, never as globals of this module, so no ``dag_id`` can overwrite a name used here;
``DAGS`` maps each dag_id to its DAG for tools.
"""

from dagspec.airflow.compiler import compile_project

DAGS = compile_project(__file__).register_dags()
