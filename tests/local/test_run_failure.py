"""`dagspec run` of a spec whose stages really fail: a query Spark refuses, a Python worker that runs out
of memory and one that is killed. Each stage's root cause, located in the spec, comes first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cli_env, dagspec_cli, write_spec

pytestmark = pytest.mark.integration

# UDFs defined inside the kind are pickled by value: the Python workers never import the plugin
WORKER_KINDS = '''
"""Kinds whose Python workers fail for real."""
from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind


@kind("grab_memory", params=StageParams)
def grab_memory(inputs: Inputs, params: StageParams, ctx: StageContext) -> Outputs:
    """Allocate 1 GiB per row in a Python worker."""
    from pyspark.sql import functions as F

    @F.udf("long")
    def grab(value: int) -> int:
        return len(bytearray(1 << 30)) + value

    return {"data": ctx.spark.range(1).select(grab("id").alias("n"))}


@kind("kill_worker", params=StageParams)
def kill_worker(inputs: Inputs, params: StageParams, ctx: StageContext) -> Outputs:
    """Kill the Python worker that evaluates the row."""
    from pyspark.sql import functions as F

    @F.udf("long")
    def die(value: int) -> int:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
        return value

    return {"data": ctx.spark.range(1).select(die("id").alias("n"))}
'''

SPEC = """default_args: {retries: 0}
stages:
  enriched:
    kind: sql
    params:
      query: select id,, id from range(3)
  starved:
    kind: grab_memory
    spark: {conf: {spark.executor.pyspark.memory: 256m}}
  crashed: {kind: kill_worker}
"""


def test_failed_stages_print_their_causes_and_spec_positions_first(tmp_path: Path, airflow_home: Path) -> None:
    spec = write_spec(tmp_path / "pipelines", SPEC, "broken_stages.yaml")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "worker_kinds.py").write_text(WORKER_KINDS)
    env = cli_env(airflow_home, DAGSPEC_PLUGINS=str(plugins), DAGSPEC_MODE="spark")
    storage = tmp_path / "storage"
    done = dagspec_cli("run", str(spec), "--storage-root", str(storage), env=env, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    expected = {
        "enriched": f"stage 'enriched' ({spec}:3:3, kind sql) failed: [PARSE_SYNTAX_ERROR] Syntax error at or "
        f"near ',' (line 1, pos 10) in stages.enriched.params.query ({spec}:6:14)",
        # the worker's real MemoryError under its limit (RLIMIT_AS), with the conf that sets the limit
        "starved": f"stage 'starved' ({spec}:7:3, kind grab_memory) failed: out of memory in a Python worker "
        "(MemoryError); give it more memory: the stage's spark.conf spark.executor.pyspark.memory (its limit), "
        "or fewer rows per partition",
        # SIGKILL: Spark's 'Python worker exited unexpectedly (crashed)', without its faulthandler hint
        "crashed": f"stage 'crashed' ({spec}:10:3, kind kill_worker) failed: a worker or executor was lost "
        "(Python worker exited unexpectedly (crashed)); killed from outside or by the machine's memory limit: "
        "see the worker's log",
    }
    lines = done.stderr.splitlines()
    # one located cause per failed stage (in the order the log shows them), then the tail
    assert sorted(lines[:3]) == sorted(expected.values()), done.stderr
    assert lines[3] == "--- last lines of the log ---"
    # the task's own failure (what the Airflow UI shows) says it first, and the attempt's record keeps it
    for stage, line in expected.items():
        record = next((storage / "broken_stages" / stage).glob("_failed-*.json"))
        assert json.loads(record.read_text())["line"] == line


PARAM_SPEC = """default_args: {retries: 0}
params:
  column: {type: string, default: id}
stages:
  picked:
    kind: sql
    params:
      query: "select {{ params.column }} as c from range(3)"
"""


def test_a_query_the_runs_params_render_into_a_refused_one_fails_with_that_cause_first(
    tmp_path: Path, airflow_home: Path
) -> None:
    """The refusal happens when the task resolves its stage, before any job: the cause still comes first."""
    spec = write_spec(tmp_path / "pipelines", PARAM_SPEC, "rendered.yaml")
    env = cli_env(airflow_home, DAGSPEC_MODE="spark")
    param = "column=reflect('java.lang.System', 'getenv')"
    done = dagspec_cli("run", str(spec), "--storage-root", str(tmp_path / "storage"), "-p", param, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith(
        f"stage 'picked' ({spec}:5:3, kind sql) failed: the spec with this run's params is refused: "
    ), done.stderr
    assert "reflect() calls Java methods by reflection and is refused" in first, first
    assert not (tmp_path / "storage" / "rendered" / "picked").exists() or not any(
        (tmp_path / "storage" / "rendered" / "picked").glob("*/_SUCCESS")
    ), "nothing may be committed"
