"""The issue's matrix example through `dagspec run`: real `airflow dags test`, real spark-submit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import CRITEO_SAMPLE, REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
DAGSPEC = str(Path(sys.executable).parent / "dagspec")
SPEC = """\
dag_id: matrix_demo
default_args: {retries: 0}
spark: {conf: {spark.sql.shuffle.partitions: 2}, resources: {driver_memory: 1g}}
stages:
  raw: {kind: read, params: {format: tsv, path: "%s", schema: criteo}}
  few:
    kind: sample
    matrix: {n: [3, 5, 7]}
    inputs: {data: raw}
    params: {n: "{{ matrix.n }}", seed: 1}
  out:
    kind: export
    inputs: {data: few}
    params: {path: "m/n{{ matrix.n }}"}
"""


def test_the_issues_matrix_example_runs_end_to_end(tmp_path: Path, airflow_home: Path) -> None:
    spec = tmp_path / "pipelines" / "matrix_demo.yaml"
    spec.parent.mkdir()
    spec.write_text(SPEC % CRITEO_SAMPLE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC"))}
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home))
    storage = tmp_path / "storage"

    def dagspec(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [DAGSPEC, *args, str(spec), "--storage-root", str(storage)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=280, cwd=REPO)

    shown = dagspec("show")
    assert shown.returncode == 0, shown.stderr
    assert "matrix stage few: n=5" in shown.stdout and "matrix stage out: n=7" in shown.stdout
    done = dagspec("run")
    assert done.returncode == 0, done.stdout + done.stderr
    for n in (3, 5, 7):
        assert pq.read_table(storage / "exports" / "m" / f"n{n}").num_rows == n
    assert all(line.split()[3] == "done" for line in dagspec("show").stdout.splitlines()[1:] if "__" in line[:24])
