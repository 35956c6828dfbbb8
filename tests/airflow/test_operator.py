"""The operator's spark-submit command, compared argument by argument (the Spark provider's own test style)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dagspec.airflow.compiler import compile_pipeline
from dagspec.airflow.operator import DagspecStageOperator, spark_submit_binary
from dagspec.errors import ConnectionMissingError
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import write_spec

SPEC = """
dag_id: shop
spark:
  conn_id: argv_spark
  conf: {spark.sql.shuffle.partitions: 8, spark.sql.ansi.enabled: true}
  resources: {driver_memory: 2g, executor_memory: 2g, executor_cores: 1, num_executors: 2}
stages:
  raw: {kind: read, params: {format: parquet, path: /data/in}}
  out:
    kind: export
    inputs: {data: raw}
    params: {path: out/train}
    spark: {conf: {spark.sql.shuffle.partitions: 2}, resources: {executor_memory: 4g, total_executor_cores: 3}}
"""


@pytest.fixture
def compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, DagspecStageOperator], dict]:
    monkeypatch.setenv("AIRFLOW_CONN_ARGV_SPARK", json.dumps({"conn_type": "spark", "host": "spark://10.0.0.5:7077"}))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", "/store")
    spec = load_spec(write_spec(tmp_path, SPEC))
    dag = compile_pipeline(spec, home=REPO, jobs_dir=REPO / "jobs")
    plan = resolve_pipeline(spec, default_context(spec), home=REPO)
    return {t: dag.get_task(t) for t in dag.task_ids}, plan  # type: ignore[return-value]


def argv(operator: DagspecStageOperator, stage: ResolvedStage, *, force: bool = False) -> list[str]:
    operator.prepare_submit(stage, force=force)
    return operator._get_hook()._build_spark_submit_command(operator.application)


def test_the_stage_is_the_only_argument_and_resources_come_from_the_spec(compiled) -> None:
    tasks, plan = compiled
    assert argv(tasks["out"], plan["out"]) == [
        spark_submit_binary(),
        "--master", "spark://10.0.0.5:7077",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.sql.ansi.enabled=true",
        "--num-executors", "2",
        "--total-executor-cores", "3",
        "--executor-cores", "1",
        "--executor-memory", "4g",
        "--driver-memory", "2g",
        "--name", "dagspec.shop.out",
        str(REPO / "jobs" / "run_stage.py"),
        plan["out"].to_json(),
    ]  # fmt: skip


def test_force_comes_before_the_stage_and_the_json_round_trips(compiled) -> None:
    tasks, plan = compiled
    command = argv(tasks["raw"], plan["raw"], force=True)
    assert command[-2:] == ["--force", plan["raw"].to_json()]
    assert ResolvedStage.from_json(command[-1]) == plan["raw"]
    assert "--total-executor-cores" not in command  # only the stage that sets it


def test_nothing_in_the_command_is_rendered_by_airflow(compiled) -> None:
    tasks, _ = compiled
    assert all(not t.template_fields for t in tasks.values())


def test_workers_get_the_venv_python_and_the_project(compiled) -> None:
    tasks, plan = compiled
    tasks["raw"].prepare_submit(plan["raw"], force=False)
    env = tasks["raw"].env_vars
    assert env["PYSPARK_PYTHON"] and Path(env["PYSPARK_PYTHON"]).name.startswith("python")
    assert env["DAGSPEC_HOME"] == str(REPO)
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)


CONNECT = {
    "conn_type": "spark_connect",
    "host": "sc://10.0.0.9",
    "port": 15002,
    "password": "s3cret-token",
    "extra": {"submit_conn_id": "argv_spark"},
}


def connection(fields: dict) -> SimpleNamespace:
    """What the operator reads of an Airflow Connection."""
    return SimpleNamespace(conn_type=fields["conn_type"], host=fields.get("host"), extra_dejson=fields.get("extra", {}))


def test_connect_mode_runs_a_python_client_whose_url_and_token_stay_out_of_argv(
    compiled, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ARGV_CONNECT", json.dumps(CONNECT))
    tasks, plan = compiled
    operator = tasks["out"]
    operator._conn_id = "argv_connect"
    assert operator.mode_of(plan["out"], connection(CONNECT)).mode == "connect"
    command = operator.connect_client_command(plan["out"], force=True, extra=CONNECT["extra"])
    assert command == [sys.executable, str(REPO / "jobs" / "run_stage.py"), "--force", plan["out"].to_json()]
    assert not any("s3cret" in part or "10.0.0.9" in part for part in command)
    env = operator.connect_client_env(CONNECT["extra"])
    assert env["DAGSPEC_CONNECT_URL"] == "sc://10.0.0.9:15002/;token=s3cret-token"
    assert env["DAGSPEC_CONNECT_LOCAL"] == "0"
    assert env["DAGSPEC_HOME"] == str(REPO)


def test_a_stage_needing_its_own_driver_is_submitted_through_the_named_spark_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_mode = {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}
    monkeypatch.setenv("AIRFLOW_CONN_ARGV_SPARK", json.dumps(cluster_mode))
    spec = load_spec(
        write_spec(
            tmp_path,
            """
dag_id: own
stages:
  raw: {kind: read, params: {format: parquet, path: /data/in}}
  model:
    kind: train_xgboost
    inputs: {train: raw}
    params: {label_col: label, features_col: features, workers: 2}
  single:
    kind: train_xgboost
    inputs: {train: raw}
    params: {label_col: label, features_col: features}
""",
        )
    )
    plan = resolve_pipeline(spec, default_context(spec), home=REPO)
    dag = compile_pipeline(spec, home=REPO, jobs_dir=REPO / "jobs")
    operator = dag.get_task("model")
    mode = operator.mode_of(plan["model"], connection(CONNECT))
    assert mode.mode == "spark-submit" and "SparkXGB" in mode.reason
    single = dag.get_task("single")
    # a remote server and a submit connection in cluster mode: the cluster places the driver
    assert single.mode_of(plan["single"], connection(CONNECT)).mode == "spark-submit"
    # in client mode (a standalone cluster's only one for Python) the driver would run here too
    monkeypatch.setenv("AIRFLOW_CONN_ARGV_SPARK", json.dumps({"conn_type": "spark", "host": "spark://m:7077"}))
    here = single.mode_of(plan["single"], connection(CONNECT))
    assert here.mode == "connect" and "would run too" in here.reason
    assert operator.mode_of(plan["model"], connection(CONNECT)).mode == "spark-submit"  # SparkXGB still
    local = {**CONNECT, "extra": {**CONNECT["extra"], "dagspec_local_server": True}}
    assert single.mode_of(plan["single"], connection(local)).mode == "connect"
    assert operator._submit_conn_id(CONNECT["extra"], "model", mode) == "argv_spark"
    with pytest.raises(ConnectionMissingError, match="submit_conn_id"):
        operator._submit_conn_id({}, "model", mode)
