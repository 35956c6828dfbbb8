"""Compile every spec in pipelines/ (or $DAGSPEC_PIPELINES) into an Airflow DAG.

Broken specs do not take the others down: they surface as this file's import error, naming each
spec file and line.
"""

import os
from pathlib import Path

from dagspec.airflow.compiler import compile_folder, invalid_specs_dag
from dagspec.spec.loader import pipelines_dir

HOME = Path(os.environ.get("DAGSPEC_HOME") or Path(__file__).resolve().parents[1])
compiled = compile_folder(pipelines_dir(HOME), home=HOME)
globals().update(compiled.dags)
if compiled.errors:
    dagspec_invalid_specs = invalid_specs_dag(compiled.errors)
