"""Compile: task ids, edges, operator arguments, params, and the DAG file under Airflow's DagBag."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagspec.airflow.compiler import compile_pipeline
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import write_spec

SPEC = """
dag_id: shop
description: demo
schedule: "0 3 * * *"
start_date: 2026-01-01
tags: [x]
default_args: {retries: 2, retry_delay: 30}
params:
  input: {type: string, default: data/in, description: Where the data is}
spark:
  conn_id: my_spark
  conf: {spark.sql.shuffle.partitions: 8, spark.eventLog.enabled: false}
  resources: {driver_memory: 2g, executor_memory: 2g, executor_cores: 1, num_executors: 2}
stages:
  raw: {kind: read, params: {format: parquet, path: "{{ params.input }}"}}
  split:
    kind: split
    inputs: {data: raw}
    params: {fractions: {train: 0.8, test: 0.2}}
  out:
    kind: export
    inputs: {data: split.train}
    params: {path: out/train}
    retries: 0
    spark: {conf: {spark.sql.shuffle.partitions: 2}, resources: {executor_memory: 4g}}
"""


def test_compile_builds_one_spark_task_per_stage(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, SPEC))
    dag = compile_pipeline(spec, home=tmp_path, jobs_dir=REPO / "jobs")
    assert dag.dag_id == "shop"
    assert sorted(dag.task_ids) == ["out", "raw", "split"]
    assert dag.get_task("split").upstream_task_ids == {"raw"}
    assert dag.get_task("out").upstream_task_ids == {"split"}
    assert "x" in dag.tags and "dagspec" in dag.tags
    assert dag.params["input"] == "data/in"
    assert dag.params.get_param("input").description == "Where the data is"
    assert dag.params["force"] is False

    raw, out = dag.get_task("raw"), dag.get_task("out")
    assert raw.application == str(REPO / "jobs" / "run_stage.py")
    assert raw._conn_id == "my_spark"
    assert raw.conf == {"spark.sql.shuffle.partitions": "8", "spark.eventLog.enabled": "false"}
    assert raw._executor_memory == "2g" and raw._num_executors == 2 and raw._driver_memory == "2g"
    assert raw.retries == 2 and raw.retry_delay.total_seconds() == 30
    # per-stage overrides win, the rest is inherited
    assert out.conf == {"spark.sql.shuffle.partitions": "2", "spark.eventLog.enabled": "false"}
    assert out._executor_memory == "4g" and out._executor_cores == 1
    assert out.retries == 0
    assert [a.name for a in dag.get_task("split").outlets] == ["shop.split.train", "shop.split.test"]
    assert [a.uri for a in raw.outlets] == ["dagspec://shop/raw/data"]
    assert out.outlets == []  # export writes outside the checkpoint store
    assert "split" in dag.get_task("split").doc_md


IMPORT_GUARD = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"pyspark", "tensorflow", "xgboost", "keras", "py4j"}:
            raise ImportError(f"blocked at DAG-parse time: {name}")
sys.meta_path.insert(0, Block())
import runpy
namespace = runpy.run_path(sys.argv[1])
print(sorted(k for k, v in namespace.items() if type(v).__name__ == "DAG"))
"""


def _env(tmp_path: Path, pipelines: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "DAGSPEC_PIPELINES": str(pipelines),
        "DAGSPEC_HOME": str(REPO),
    }


def test_dag_file_imports_without_spark_tensorflow_or_xgboost(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_GUARD, str(REPO / "dags" / "dagspec_pipelines.py")],
        env=_env(tmp_path, REPO / "pipelines"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shipped = {load_spec(p).dag_id for p in (REPO / "pipelines").glob("*.yaml")}
    assert set(json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))) == shipped


DAGBAG = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"dags": sorted(bag.dag_ids), "errors": bag.import_errors}))
"""


def _dagbag(tmp_path: Path, pipelines: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", DAGBAG, str(REPO / "dags" / "dagspec_pipelines.py")],
        env=_env(tmp_path, pipelines),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_dagbag_loads_every_shipped_spec_and_reports_a_broken_one_by_name(tmp_path: Path) -> None:
    shipped = sorted(load_spec(p).dag_id for p in (REPO / "pipelines").glob("*.yaml"))
    clean = _dagbag(tmp_path, REPO / "pipelines")
    assert clean == {"dags": shipped, "errors": {}}

    pipelines = tmp_path / "pipelines"
    shutil.copytree(REPO / "pipelines", pipelines)
    (pipelines / "broken.yaml").write_text("stages:\n  raw:\n    kind: reed\n")
    broken = _dagbag(tmp_path, pipelines)
    assert broken["dags"] == shipped
    assert len(broken["errors"]) == 1
    (message,) = broken["errors"].values()
    assert "broken.yaml:3:11: stages.raw.kind: unknown stage kind 'reed' (did you mean 'read'?)" in message
