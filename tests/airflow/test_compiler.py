"""Compile: task ids, edges, operator arguments, params, and the DAG file under Airflow's DagBag."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagspec.airflow.compiler import compile_folder, compile_pipeline, invalid_specs_dag
from dagspec.errors import SpecError
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
    assert dag.max_active_runs == 1  # one run at a time unless the spec says otherwise


def test_max_active_runs_lets_runs_of_one_dag_overlap(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, SPEC.replace("tags: [x]", "tags: [x]\nmax_active_runs: 3")))
    assert compile_pipeline(spec, home=tmp_path, jobs_dir=REPO / "jobs").max_active_runs == 3


IMPORT_GUARD = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"pyspark", "tensorflow", "xgboost", "keras", "py4j", "vowpalwabbit", "pylibvw"}:
            raise ImportError(f"blocked at DAG-parse time: {name}")
sys.meta_path.insert(0, Block())
import runpy
pipelines = runpy.run_path(sys.argv[1] + "/dagspec_pipelines.py")
errors = runpy.run_path(sys.argv[1] + "/dagspec_spec_errors.py")
print(sorted(pipelines["DAGS"]), len(errors["ERRORS"]))
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
        [sys.executable, "-c", IMPORT_GUARD, str(REPO / "dags")],
        env=_env(tmp_path, REPO / "pipelines"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shipped = {load_spec(p).dag_id for p in (REPO / "pipelines").glob("*.yaml")}
    dag_ids, errors = done.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert (set(json.loads(dag_ids.replace("'", '"'))), errors) == (shipped, "0")


def test_airflow_safe_mode_parses_both_dag_files() -> None:
    """Under dag_discovery_safe_mode (the compose stack's default) a file is parsed only if it
    holds the words "airflow" and "dag": the spec errors' file must not be skipped."""
    from airflow.utils.file import might_contain_dag_via_default_heuristic

    files = sorted(p.name for p in (REPO / "dags").glob("*.py"))
    assert files == ["dagspec_pipelines.py", "dagspec_spec_errors.py"]
    for name in files:
        assert might_contain_dag_via_default_heuristic(str(REPO / "dags" / name)), name


DAGBAG = """
import json, os, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
files = {os.path.basename(dag.fileloc) for dag in bag.dags.values()}
errors = {os.path.basename(path): error for path, error in bag.import_errors.items()}
print(json.dumps({"dags": sorted(bag.dag_ids), "files": sorted(files), "errors": errors}))
"""


def _dagbag(tmp_path: Path, pipelines: Path) -> dict:
    return _over_dag_folder(DAGBAG, _env(tmp_path, pipelines))


def _over_dag_folder(script: str, env: dict[str, str]) -> dict:
    """What ``script`` prints last (JSON), run in a fresh Python over the repo's ``dags/``."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(REPO / "dags")], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_dagbag_loads_every_shipped_spec_and_reports_a_broken_one_by_name(tmp_path: Path) -> None:
    shipped = sorted(load_spec(p).dag_id for p in (REPO / "pipelines").glob("*.yaml"))
    clean = _dagbag(tmp_path, REPO / "pipelines")
    assert clean == {"dags": shipped, "files": ["dagspec_pipelines.py"], "errors": {}}

    pipelines = tmp_path / "pipelines"
    shutil.copytree(REPO / "pipelines", pipelines)
    (pipelines / "broken.yaml").write_text("stages:\n  raw:\n    kind: reed\n")
    broken = _dagbag(tmp_path, pipelines)
    # the good DAGs' file has no import error (Airflow would mark its DAGs stale): the other has it
    assert (broken["dags"], broken["files"]) == (shipped, ["dagspec_pipelines.py"])
    assert list(broken["errors"]) == ["dagspec_spec_errors.py"]
    (message,) = broken["errors"].values()
    assert message.startswith("SpecError: ") and "Traceback" not in message
    assert "broken.yaml:3:11: stages.raw.kind: unknown stage kind 'reed' (did you mean 'read'?)" in message


GOOD = "stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"


@pytest.mark.integration
def test_no_spec_can_take_the_dag_file_down(tmp_path: Path) -> None:
    """Recursive aliases, deep nesting, a dag_id naming a global of the DAG file or too long for
    Airflow, beside good specs: the good ones load, each bad one is named in the file's error."""
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "good.yaml").write_text(GOOD)
    (pipelines / "compiled.yaml").write_text("dag_id: compiled\n" + GOOD)  # a name the DAG file once used
    (pipelines / "DAGS.yaml").write_text("dag_id: DAGS\n" + GOOD)
    (pipelines / "alias.yaml").write_text("a: &a [*a]\n" + GOOD)
    (pipelines / "deep.yaml").write_text("x: " + "[" * 500 + "]" * 500 + "\n" + GOOD)
    (pipelines / "long.yaml").write_text("dag_id: " + "x" * 260 + "\n" + GOOD)
    bag = _dagbag(tmp_path, pipelines)
    assert (bag["dags"], bag["files"]) == (["DAGS", "compiled", "good"], ["dagspec_pipelines.py"])
    assert list(bag["errors"]) == ["dagspec_spec_errors.py"]
    (message,) = bag["errors"].values()
    assert "alias.yaml:1:4: a[0]: recursive alias: this value contains itself" in message
    assert "deep.yaml:1:" in message and "nested more than 100 levels deep" in message
    assert "long.yaml:1:9: dag_id: dag_id is 260 characters long; Airflow allows at most 250" in message


def test_any_exception_while_loading_a_spec_becomes_that_files_error(tmp_path: Path, monkeypatch) -> None:
    from dagspec.airflow import compiler

    write_spec(tmp_path / "pipelines", GOOD, "good.yaml")
    write_spec(tmp_path / "pipelines", GOOD, "buggy.yaml")
    real = compiler.compile_pipeline

    def compile_or_fail(spec, **kwargs):
        if spec.dag_id == "buggy":
            raise RecursionError("maximum recursion depth exceeded")
        return real(spec, **kwargs)

    monkeypatch.setattr(compiler, "compile_pipeline", compile_or_fail)
    result = compiler.compile_folder(tmp_path / "pipelines", home=tmp_path)
    assert sorted(result.dags) == ["good"]
    assert [str(e) for e in result.errors] == [
        "pipelines/buggy.yaml:1:1: cannot be loaded: RecursionError: maximum recursion depth exceeded"
    ]


def test_the_stand_in_dag_fails_validation_with_every_spec_error(tmp_path: Path) -> None:
    write_spec(tmp_path / "pipelines", GOOD, "good.yaml")
    write_spec(tmp_path / "pipelines", "stages:\n  raw:\n    kind: reed\n", "a.yaml")
    write_spec(tmp_path / "pipelines", "dag_id: dagspec_invalid_specs\n" + GOOD, "b.yaml")
    errors = compile_folder(tmp_path / "pipelines", home=tmp_path).errors
    stand_in = invalid_specs_dag(errors)
    assert stand_in.dag_id == "dagspec_invalid_specs" and not stand_in.task_ids
    with pytest.raises(SpecError) as raised:
        stand_in.validate()
    assert str(raised.value).splitlines() == [line for error in errors for line in str(error).splitlines()]
    assert str(raised.value).startswith("pipelines/a.yaml:3:11: stages.raw.kind: unknown stage kind 'reed'")
    assert "pipelines/b.yaml:1:9: dag_id: dag_id 'dagspec_invalid_specs' is reserved" in str(raised.value)


def test_a_matrix_stage_is_a_task_group_of_its_expansions(tmp_path: Path) -> None:
    spec = load_spec(
        write_spec(
            tmp_path,
            """
            stages:
              raw: {kind: read, params: {format: parquet, path: data/in}}
              few: {kind: sample, matrix: {n: [3, 5]}, inputs: {data: raw}, params: {n: "{{ matrix.n }}"}}
              out: {kind: export, inputs: {data: few}, params: {path: "m/n{{ matrix.n }}"}}
            """,
        )
    )
    dag = compile_pipeline(spec, home=tmp_path, jobs_dir=REPO / "jobs")
    assert sorted(dag.task_ids) == ["few__3", "few__5", "out__3", "out__5", "raw"]
    groups = dag.task_group.children
    assert sorted(groups["few"].children) == ["few__3", "few__5"]
    assert sorted(groups["out"].children) == ["out__3", "out__5"]
    assert dag.get_task("out__5").upstream_task_ids == {"few__5"}
    assert 'matrix: `{"n": 5}`' in dag.get_task("few__5").doc_md


DAG_SOURCES = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
sources = {dag_id: bag.dags[dag_id].doc_md.split("Compiled by dagspec from ")[-1] for dag_id in bag.dag_ids}
print(json.dumps({"dags": sources, "errors": bag.import_errors}))
"""


def _dag_sources(tmp_path: Path, pipelines: Path) -> dict:
    return _over_dag_folder(DAG_SOURCES, {**_env(tmp_path, pipelines), "DAGSPEC_HOME": str(tmp_path)})


@pytest.mark.integration
def test_a_dag_id_two_specs_share_runs_neither_and_the_import_error_names_both(tmp_path: Path) -> None:
    """File order must not pick the pipeline a dag_id runs: both specs are import errors."""
    pipelines = tmp_path / "pipelines"
    write_spec(pipelines, "dag_id: ctr_demo\n" + GOOD, "a.yaml")
    write_spec(pipelines, "# being edited\ndag_id: ctr_demo\n" + GOOD.replace("data/in", "data/new"), "b.yaml")
    write_spec(pipelines, GOOD, "good.yaml")
    bag = _dag_sources(tmp_path, pipelines)
    assert bag["dags"] == {"good": "`pipelines/good.yaml`."}
    (message,) = bag["errors"].values()
    assert (
        "pipelines/a.yaml:1:9: dag_id: 'ctr_demo' is also the dag_id of pipelines/b.yaml:2:9; "
        "each spec needs its own dag_id\n"
        "pipelines/b.yaml:2:9: dag_id: 'ctr_demo' is also the dag_id of pipelines/a.yaml:1:9; "
        "each spec needs its own dag_id"
    ) in message

    # the copy gets its own dag_id: each DAG is compiled from its own file
    (pipelines / "b.yaml").write_text((pipelines / "b.yaml").read_text().replace("ctr_demo", "ctr_demo_v2"))
    assert _dag_sources(tmp_path, pipelines) == {
        "dags": {
            "ctr_demo": "`pipelines/a.yaml`.",
            "ctr_demo_v2": "`pipelines/b.yaml`.",
            "good": "`pipelines/good.yaml`.",
        },
        "errors": {},
    }
