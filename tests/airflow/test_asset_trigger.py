"""Under real Airflow, an upstream spec's run queues the runs of the specs scheduled on its outputs.

The folder holds `asset_up` (one stage), `asset_down` (scheduled on `asset_up.raw.data`) and
`asset_both` (scheduled on all of `asset_up.raw.data` and `asset_other.raw.data`, which never runs).
The DAG file's DAGs are serialized into a fresh DB (the dag-processor's work), the downstream DAGs
unpaused, `asset_up` run with `dagspec run` (`airflow dags test`); then the scheduler's own step
that creates DAG runs (``SchedulerJobRunner._create_dagruns_for_dags``) runs once.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CRITEO_SAMPLE, REPO

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent

READ = f"stages:\n  raw: {{kind: read, params: {{format: tsv, path: {CRITEO_SAMPLE}, schema: criteo}}}}\n"
SPECS = {
    "asset_up": "spark: {conf: {spark.sql.shuffle.partitions: 2}}\n" + READ,
    "asset_other": READ,
    "asset_down": "schedule: {assets: [asset_up.raw.data]}\n" + READ,
    "asset_both": "schedule: {assets: [asset_up.raw.data, asset_other.raw.data]}\n" + READ,
}
CREATE_RUNS = """
from airflow.jobs.job import Job
from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
from airflow.utils.session import create_session
from airflow.utils.sqlalchemy import prohibit_commit

runner = SchedulerJobRunner(job=Job(), num_runs=1)
with create_session() as session, prohibit_commit(session) as guard:
    runner._create_dagruns_for_dags(guard, session)
"""


def _env(base: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k == "DAGSPEC_CONNECT_PORT"
    }
    env.update(
        DAGSPEC_HOME=str(REPO),
        DAGSPEC_AIRFLOW_HOME=str(base / "airflow"),
        DAGSPEC_PIPELINES=str(base / "pipelines"),
        DAGSPEC_MODE="connect",
        AIRFLOW_HOME=str(base / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
    )
    return env


def _run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _rows(base: Path, query: str) -> set[tuple[str, ...]]:
    with sqlite3.connect(base / "airflow" / "airflow.db") as db:
        return set(db.execute(query).fetchall())


def test_an_upstream_run_queues_and_triggers_the_specs_scheduled_on_its_outputs(tmp_path: Path) -> None:
    (tmp_path / "pipelines").mkdir()
    for dag_id, text in SPECS.items():
        (tmp_path / "pipelines" / f"{dag_id}.yaml").write_text(text)
    env = _env(tmp_path)
    _run([str(BIN / "dagspec"), "init"], env)  # the DB, migrated
    _run([str(BIN / "airflow"), "dags", "reserialize"], env)
    for dag_id in ("asset_down", "asset_both"):
        _run([str(BIN / "airflow"), "dags", "unpause", dag_id], env)
    references = _rows(
        tmp_path,
        "SELECT r.dag_id, a.name FROM dag_schedule_asset_reference r JOIN asset a ON a.id = r.asset_id",
    )
    assert references == {
        ("asset_down", "asset_up.raw.data"),
        ("asset_both", "asset_up.raw.data"),
        ("asset_both", "asset_other.raw.data"),
    }

    up = tmp_path / "pipelines" / "asset_up.yaml"
    _run([str(BIN / "dagspec"), "run", str(up), "--storage-root", str(tmp_path / "storage")], env)
    queued = "SELECT q.target_dag_id, a.name FROM asset_dag_run_queue q JOIN asset a ON a.id = q.asset_id"
    assert _rows(tmp_path, queued) == {("asset_down", "asset_up.raw.data"), ("asset_both", "asset_up.raw.data")}

    _run([sys.executable, "-c", CREATE_RUNS], env)
    runs = _rows(tmp_path, "SELECT dag_id, run_type FROM dag_run WHERE dag_id != 'asset_up'")
    assert runs == {("asset_down", "asset_triggered")}  # asset_both still waits for asset_other
    assert _rows(tmp_path, queued) == {("asset_both", "asset_up.raw.data")}
    consumed = _rows(
        tmp_path,
        "SELECT e.source_dag_id, e.source_task_id FROM dagrun_asset_event c "
        "JOIN asset_event e ON e.id = c.event_id JOIN dag_run r ON r.id = c.dag_run_id WHERE r.dag_id = 'asset_down'",
    )
    assert consumed == {("asset_up", "raw")}
