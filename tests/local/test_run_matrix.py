"""The issue's matrix example through `dagspec run`: real `airflow dags test`, real spark-submit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import CRITEO_SAMPLE
from tests.helpers import cli_env, dagspec_cli, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
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
    spec = write_spec(tmp_path / "pipelines", SPEC % CRITEO_SAMPLE, "matrix_demo.yaml")
    env = cli_env(airflow_home)
    storage = tmp_path / "storage"

    def dagspec(*args: str) -> subprocess.CompletedProcess[str]:
        return dagspec_cli(*args, str(spec), "--storage-root", str(storage), env=env, timeout=280)

    shown = dagspec("show")
    assert shown.returncode == 0, shown.stderr
    assert "matrix stage few: n=5" in shown.stdout and "matrix stage out: n=7" in shown.stdout
    done = dagspec("run")
    assert done.returncode == 0, done.stdout + done.stderr
    for n in (3, 5, 7):
        assert pq.read_table(storage / "exports" / "m" / f"n{n}").num_rows == n
    assert all(line.split()[3] == "done" for line in dagspec("show").stdout.splitlines()[1:] if "__" in line[:24])
