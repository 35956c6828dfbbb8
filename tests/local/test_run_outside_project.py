"""`dagspec run` where Airflow would find no DAG: outside a project it refuses before starting
anything, naming the folder it looked in, why, and what to do; a DAG file that fails to import is
named with its error first, never a run state of `None`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import DAGSPEC

SPEC = REPO / "pipelines" / "ctr_demo.yaml"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC"))}
    return {**env, "DAGSPEC_CONNECT_PORT": os.environ.get("DAGSPEC_CONNECT_PORT", "15002"), **extra}


def _run(cwd: Path, spec: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DAGSPEC, "run", str(spec)], cwd=cwd, env=_env(**extra), capture_output=True, text=True, timeout=300
    )


def test_run_in_an_empty_folder_names_it_and_the_project_of_the_spec(tmp_path: Path) -> None:
    done = _run(tmp_path, SPEC)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: {tmp_path} (the current directory; DAGSPEC_HOME is not set) is not a dagspec project: it has "
        "no dags/ folder (and no pipelines/ folder), so Airflow would find no DAG to run; "
        f"cd {REPO} (the project holding pipelines/ctr_demo.yaml), or set DAGSPEC_HOME={REPO}\n"
    )
    assert list(tmp_path.iterdir()) == []  # no Airflow DB, no env file, no log, no Connect server's files


def test_a_dagspec_home_that_is_no_project_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "other.py").write_text('"""An Airflow DAG of something else."""\n')
    spec = tmp_path / "pipelines" / "ctr_demo.yaml"
    spec.write_text(SPEC.read_text())
    done = _run(REPO, spec, DAGSPEC_HOME=str(tmp_path))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: {tmp_path} ($DAGSPEC_HOME) is not a dagspec project: it has no DAG file in dags/ that "
        "compiles the specs (a .py file importing dagspec), so Airflow would find no DAG to run; cd into your "
        "dagspec project (the folder holding dags/ and pipelines/), or set DAGSPEC_HOME to it\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dags", "pipelines"]


@pytest.mark.integration
def test_a_dag_file_that_fails_to_import_comes_first(tmp_path: Path, airflow_home: Path) -> None:
    """The real `airflow dags test` finds no DAG: the DAG file's own error is the cause printed."""
    (tmp_path / "dags").mkdir()
    dag_file = (REPO / "dags" / "dagspec_pipelines.py").read_text()
    (tmp_path / "dags" / "dagspec_pipelines.py").write_text(f"{dag_file}\nraise RuntimeError('no DAGs today')\n")
    spec = tmp_path / "pipelines" / "tiny.yaml"
    spec.parent.mkdir()
    spec.write_text("stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n")
    done = _run(tmp_path, spec, DAGSPEC_AIRFLOW_HOME=str(airflow_home), DAGSPEC_MODE="spark")
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].startswith("running tiny (1 stages) through `airflow dags test`")
    assert done.stderr.splitlines()[:2] == [
        "error: Airflow found no DAG 'tiny' in dags/: dags/dagspec_pipelines.py failed to import: "
        "RuntimeError: no DAGs today",
        "--- last lines of the log ---",
    ]
    assert "None" not in done.stdout
