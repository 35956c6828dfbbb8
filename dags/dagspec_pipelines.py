"""Compile every spec in pipelines/ (or $DAGSPEC_PIPELINES) into an Airflow DAG.

Broken specs do not take the others down: whatever loading one spec raises becomes an import
error of this file (through the stand-in DAG ``dagspec_invalid_specs``) naming the spec file and
line. The DAGs are registered with Airflow by the compiler, never as globals of this module, so
no ``dag_id`` can overwrite a name used here; ``DAGS`` maps each dag_id to its DAG for tools.
"""

import os
from pathlib import Path

from dagspec.airflow.compiler import compile_folder
from dagspec.spec.loader import pipelines_dir

HOME = Path(os.environ.get("DAGSPEC_HOME") or Path(__file__).resolve().parents[1])
DAGS = compile_folder(pipelines_dir(HOME), home=HOME).dags
