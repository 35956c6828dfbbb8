"""A failed stage's root cause as one located line: Spark errors through the real runtime and the job
entry's failure path, a plugin's Python exception, out of memory and a lost worker on captured text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException, ParseException

from dagspec.job.failure import stage_failure
from dagspec.job.main import main, report_failure
from dagspec.job.runtime import run_stage
from dagspec.kinds.catalog import build_catalog
from dagspec.plan.failure import MARKER, StageFailure, failure_line, find_failure, read_record, record_path
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import parquet_table, write_spec

pytestmark = pytest.mark.spark

SPEC = """
stages:
  raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
  enriched:
    kind: sql
    inputs: {{data: raw}}
    params:
      query: "{query}"
"""


def _run_broken(spark, tmp_path: Path, query: str, error: type[Exception], match: str):
    data = parquet_table(spark, tmp_path, 10)
    path = write_spec(tmp_path / "pipelines", SPEC.format(data=data, query=query), "x.yaml")
    spec = load_spec(path, "pipelines/x.yaml")
    context = default_context(spec, {})
    run_stage(spark, resolve_pipeline(spec, context)["raw"])
    stage = resolve_pipeline(spec, context)["enriched"]
    with pytest.raises(error, match=match) as raised:
        run_stage(spark, stage)
    return spec, stage, raised.value


def _reported(stage: ResolvedStage, exc: Exception, capsys: pytest.CaptureFixture[str]):
    report_failure(stage, exc, None)
    err = capsys.readouterr().err
    markers = [line for line in err.splitlines() if line.startswith(MARKER)]
    assert len(markers) == 1 and err.rstrip().endswith(markers[0])  # one marker, after the trace
    failure = find_failure(err.splitlines())
    assert failure is not None and read_record(stage.stage_dir, stage.fingerprint) == failure
    return failure


@pytest.mark.parametrize(
    ("query", "error", "condition", "cause"),
    [
        (  # a parse error
            "SELECT id,, label FROM data",
            ParseException,
            "PARSE_SYNTAX_ERROR",
            "[PARSE_SYNTAX_ERROR] Syntax error at or near ',' (line 1, pos 10)",
        ),
        (  # an unknown column
            "SELECT nope FROM data",
            AnalysisException,
            "UNRESOLVED_COLUMN",
            "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `nope` cannot "
            "be resolved. Did you mean one of the following? [`id`, `label`] (line 1, pos 7)",
        ),
    ],
)
def test_a_failing_sql_query_names_the_stage_and_the_query(
    spark, home, tmp_path: Path, capsys, query: str, error: type[Exception], condition: str, cause: str
) -> None:
    spec, stage, exc = _run_broken(spark, tmp_path, query, error, condition)
    assert failure_line(spec, _reported(stage, exc, capsys)) == (
        f"stage 'enriched' (pipelines/x.yaml:3:3, kind sql) failed: {cause} "
        "in stages.enriched.params.query (pipelines/x.yaml:7:14)"
    )


PLUGIN = '''
"""A kind that fails in its own code."""
from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, StageParams, kind


class ExplodeParams(StageParams):
    limit: int = 3


def _check(rows: int, limit: int) -> None:
    if rows > limit:
        raise ValueError(f"{rows} rows, more than {limit}")


@kind("explode", params=ExplodeParams, inputs={"data": TABLE})
def explode(inputs: Inputs, params: ExplodeParams, ctx: StageContext) -> Outputs:
    _check(inputs["data"].count(), params.limit)
    return {"data": inputs["data"]}
'''


def test_a_python_exception_in_a_plugin_kind_names_its_last_frame(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "failing_kinds.py").write_text(PLUGIN)
    monkeypatch.setenv("DAGSPEC_PLUGINS", str(tmp_path / "plugins"))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "storage"))
    catalog = build_catalog(tmp_path)
    data = parquet_table(spark, tmp_path, 10)
    text = f'stages:\n  raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}\n'
    text += "  capped:\n    kind: explode\n    inputs: {data: raw}\n"
    spec = load_spec(write_spec(tmp_path / "pipelines", text, "p.yaml"), "pipelines/p.yaml", catalog=catalog)
    context = default_context(spec, {})
    run_stage(spark, resolve_pipeline(spec, context, home=tmp_path, catalog=catalog)["raw"], catalog=catalog)
    stage = resolve_pipeline(spec, context, home=tmp_path, catalog=catalog)["capped"]
    with pytest.raises(ValueError, match="10 rows") as raised:
        run_stage(spark, stage, catalog=catalog)
    failure = _reported(stage, raised.value, capsys)
    assert failure_line(spec, failure) == (
        "stage 'capped' (pipelines/p.yaml:3:3, kind explode) failed: ValueError: 10 rows, more than 3 "
        "(at plugins/failing_kinds.py:12 in _check)"
    )


def test_a_frame_in_spark_submits_copy_of_a_plugin_names_the_plugin_file(tmp_path: Path) -> None:
    # spark-submit ships a plugin file (--py-files): its driver imports the copy under userFiles-<uuid>/
    plugin = tmp_path / "plugins" / "team_kinds.py"
    copy = "/tmp/spark-1f2e/userFiles-9a8b/team_kinds.py"
    namespace: dict[str, Any] = {}
    exec(compile("def check(rows):\n    raise ValueError(f'{rows} rows, more than 3')\n", copy, "exec"), namespace)
    try:
        namespace["check"](10)
    except ValueError as exc:
        failure = stage_failure(exc, "checked", "too_many_rows", {}, code_files=(copy, str(plugin)), home=tmp_path)
    assert failure.cause == "ValueError: 10 rows, more than 3 (at plugins/team_kinds.py:2 in check)"


@pytest.mark.integration
def test_the_stage_entry_reports_a_parse_error_across_the_process_boundary(spark, home, tmp_path: Path) -> None:
    """jobs/run_stage.py as its own driver (as under spark-submit): exit code 1, the marker line last
    in its output, the record beside the checkpoints."""
    data = parquet_table(spark, tmp_path, 10)
    path = write_spec(tmp_path / "pipelines", SPEC.format(data=data, query="SELECT id,, label FROM data"), "x.yaml")
    spec = load_spec(path, "pipelines/x.yaml")
    context = default_context(spec, {})
    run_stage(spark, resolve_pipeline(spec, context)["raw"])
    stage = resolve_pipeline(spec, context)["enriched"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSPEC_CONNECT")}
    done = _run_job(
        stage, {**env, "PYSPARK_SUBMIT_ARGS": "--master local[1] --conf spark.ui.enabled=false pyspark-shell"}
    )
    assert done.returncode == 1
    failure = find_failure(done.stderr.splitlines())
    assert failure is not None
    assert done.stderr.rstrip().splitlines()[-1] == failure.marker_line()
    assert failure_line(spec, failure) == (
        "stage 'enriched' (pipelines/x.yaml:3:3, kind sql) failed: [PARSE_SYNTAX_ERROR] Syntax error at or near "
        "',' (line 1, pos 10) in stages.enriched.params.query (pipelines/x.yaml:7:14)"
    )
    assert json.loads(Path(record_path(stage.stage_dir, stage.fingerprint)).read_text())["cause"] == failure.cause
    assert "Traceback" in done.stderr  # the full trace stays in the log


# Captured from real failures (Spark 4 driver logs); a real OOM or a killed worker takes minutes.
OOM = (
    "An error occurred while calling o123.parquet.\n: org.apache.spark.SparkException: Job aborted due to stage "
    "failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 7) "
    "(10.0.0.5 executor driver): java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays"
)
LOST = (
    "[SPARK_JOB_CANCELLED] Job aborted due to stage failure: Task 1 in stage 2.0 failed 4 times, most recent "
    "failure: Lost task 1.3 in stage 2.0 (TID 9) (10.0.0.7 executor 2): ExecutorLostFailure (executor 2 exited "
    "caused by one of the running tasks) Reason: Command exited with code 137. SQLSTATE: XXKDA"
)


def test_out_of_memory_is_named_before_the_spark_wrapper() -> None:
    failure = stage_failure(RuntimeError(OOM), "train", "xgboost", {})
    assert failure.cause == (
        "out of memory (java.lang.OutOfMemoryError: Java heap space); give it more "
        "memory: the stage's spark.resources driver_memory / executor_memory, or fewer rows per partition"
    )


def test_a_lost_executor_is_named_before_the_spark_error_class() -> None:
    try:
        try:
            raise ConnectionError(LOST)
        except ConnectionError as inner:
            raise RuntimeError("stage failed") from inner
    except RuntimeError as exc:
        failure = stage_failure(exc, "train", "xgboost", {})
    assert failure.cause == (
        "a worker or executor was lost (ExecutorLostFailure (executor 2 exited caused by one of the running tasks) "
        "Reason: Command exited with code 137); killed from outside or by the machine's memory limit: see the "
        "worker's log"
    )


@pytest.mark.integration
def test_the_stage_entry_as_a_connect_client_reports_an_unknown_column(home, tmp_path: Path) -> None:
    """jobs/run_stage.py as a client of the local Spark Connect server: the server's analysis error
    arrives as pyspark's Connect exception and becomes the same one line."""
    from dagspec.job.connect_auth import server_token, with_token
    from dagspec.job.connect_server import ensure_server

    url = with_token(ensure_server(REPO), server_token(REPO))  # as the connection of a user's own server
    text = "stages:\n  few:\n    kind: sql\n    params: {query: 'SELECT nope FROM range(3)'}\n"
    spec = load_spec(write_spec(tmp_path / "pipelines", text, "c.yaml"), "pipelines/c.yaml")
    stage = resolve_pipeline(spec, default_context(spec, {}))["few"]
    env = {**os.environ, "DAGSPEC_CONNECT_URL": url, "DAGSPEC_CONNECT_LOCAL": "0"}
    done = _run_job(stage, env)
    assert done.returncode == 1
    failure = find_failure(done.stderr.splitlines())
    assert failure is not None, done.stderr[-3000:]
    assert failure_line(spec, failure) == (
        "stage 'few' (pipelines/c.yaml:2:3, kind sql) failed: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, "
        "variable, or function parameter with name `nope` cannot be resolved. Did you mean one of the following? "
        "[`id`] (line 1, pos 7) in stages.few.params.query (pipelines/c.yaml:4:21)"
    )


def test_a_marker_is_found_inside_a_log_handlers_line() -> None:
    failure = stage_failure(ValueError("bad"), "few", "sql", {})
    lines = [
        "2026-12-03T13:00:24Z [info     ] noise [airflow.task] loc=operator.py:152",
        f"2026-12-03T13:00:24Z [info     ] {failure.marker_line()} [airflow.task.operators] loc=operator.py:152",
        failure.marker_line(),
    ]
    assert find_failure(lines) == failure
    assert failure.cause == "ValueError: bad"


def test_the_stage_entry_refuses_params_its_kind_no_longer_accepts_with_a_marker_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the kind's code changed between planning and running: nothing starts, the cause names the stage
    spec = load_spec(write_spec(tmp_path, "stages:\n  few: {kind: sql, params: {query: 'SELECT 1'}}\n"))
    sent = json.loads(resolve_pipeline(spec, default_context(spec), storage_root=str(tmp_path))["few"].to_json())
    assert main([json.dumps({**sent, "params": {"query": "SELECT 1", "rows": 3}})]) == 1
    failure = find_failure(capsys.readouterr().err.splitlines())
    assert failure == StageFailure("few", "sql", failure.cause if failure else "")
    assert failure is not None and failure.cause.startswith("params refused by kind 'sql': rows: Extra inputs")


def _run_job(stage: Any, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real stage entry (jobs/run_stage.py) for ``stage``, in a process of its own."""
    return subprocess.run(
        [sys.executable, str(REPO / "jobs" / "run_stage.py"), stage.to_json()],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


def test_a_local_server_dead_of_out_of_memory_is_the_cause_not_its_stopped_context(
    home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # at 10^6 Criteo rows the server's heap ran out under one stage; the clients only saw
    # "Cannot call methods on a stopped SparkContext" or a lost connection
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setenv("DAGSPEC_RUN_DIR", str(run_dir))
    monkeypatch.setenv("DAGSPEC_CONNECT_LOCAL", "1")
    monkeypatch.setenv("DAGSPEC_CONNECT_DRIVER_MEMORY", "4g")
    log = run_dir / "spark-connect.log"
    earlier = "INFO SparkContext: Running Spark version 4.2.0\nERROR Executor: java.lang.OutOfMemoryError: old one\n"
    log.write_text(earlier + "INFO SparkContext: Running Spark version 4.2.0\nINFO ok\n")
    text = "stages:\n  few:\n    kind: sql\n    params: {query: 'SELECT 1 AS x'}\n"
    spec = load_spec(write_spec(tmp_path / "pipelines", text, "m.yaml"), "pipelines/m.yaml")
    stage = resolve_pipeline(spec, default_context(spec, {}))["few"]
    stopped = RuntimeError("(java.lang.IllegalStateException) Cannot call methods on a stopped SparkContext.")
    assert _reported_with_url(stage, stopped, capsys).cause.startswith("RuntimeError: ")  # an earlier instance's OOM
    with log.open("a") as out:
        out.write("ERROR Executor: Exception in task 1.0\njava.lang.OutOfMemoryError: Java heap space\n\tat x\n")
    assert _reported_with_url(stage, stopped, capsys).cause == (
        "the local Spark Connect server ran out of memory (java.lang.OutOfMemoryError: Java heap space) and stopped; "
        "nothing was committed, a retry runs the stage again and restarts the server; give it a larger heap: "
        "DAGSPEC_CONNECT_DRIVER_MEMORY (now 4g), or fewer stages at once"
    )
    monkeypatch.setenv("DAGSPEC_CONNECT_LOCAL", "0")  # another's server: its log is not ours to read
    assert "out of memory" not in _reported_with_url(stage, stopped, capsys).cause


def _reported_with_url(stage: ResolvedStage, exc: Exception, capsys: pytest.CaptureFixture[str]) -> Any:
    report_failure(stage, exc, "sc://127.0.0.1:15002")
    failure = find_failure(capsys.readouterr().err.splitlines())
    assert failure is not None
    return failure
