"""Per-stage overhead: a checkpoint hit, and a no-op stage through spark-submit.

A one-stage pipeline (``sql: SELECT 1 AS x``) is run in a private project home (its own Airflow
home, SQLite DB, storage root and ``.dagspec/env``; dags/ and jobs/ link to this checkout), so it
never touches the shared ``.dagspec/``. Measured, interleaved round by round:

- ``hit, operator in-process``: ``DagspecStageOperator.execute`` when the checkpoint exists
  (resolve the pipeline, look for ``_SUCCESS``), no Airflow process around it;
- ``hit, dagspec run``: ``dagspec run`` with the checkpoint present: the task's own duration
  (``task_instance.duration`` in the Airflow DB) and the whole command;
- ``hit, airflow tasks test``: the whole ``airflow tasks test`` command;
- ``no-op, dagspec run --force``: the same stage recomputed through the operator and
  spark-submit: task duration and whole command;
- ``no-op, spark-submit``: ``spark-submit jobs/run_stage.py --force '<stage JSON>'`` alone.

Usage: ``.venv/bin/python bench/stage_overhead.py [--repeat 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DAG_ID = "bench_noop"
STAGE = "noop"
SPEC = f"""\
dag_id: {DAG_ID}
description: one no-op stage, for overhead measurements
schedule: null
start_date: 2026-01-01
spark:
  conf: {{spark.ui.enabled: false, spark.sql.shuffle.partitions: 1}}
  resources: {{driver_memory: 1g}}
stages:
  {STAGE}: {{kind: sql, params: {{query: SELECT 1 AS x}}}}
"""


def make_home(root: Path) -> dict[str, str]:
    """A throwaway project home; returns the environment every command runs with."""
    (root / "dags").mkdir(parents=True)
    (root / "pipelines").mkdir()
    # Links, not copies: the benchmark runs this checkout's entry file and job.
    (root / "dags" / "dagspec_pipelines.py").symlink_to(REPO / "dags" / "dagspec_pipelines.py")
    (root / "jobs").symlink_to(REPO / "jobs")
    (root / "plugins").mkdir()
    (root / "pipelines" / f"{DAG_ID}.yaml").write_text(SPEC)
    return home_env(root)


def home_env(root: Path) -> dict[str, str]:
    """The environment every command runs with, for the project home ``root``."""
    return {
        **os.environ,
        "DAGSPEC_HOME": str(root),
        "DAGSPEC_AIRFLOW_HOME": str(root / ".dagspec" / "airflow"),
        "DAGSPEC_PIPELINES": str(root / "pipelines"),
        "DAGSPEC_STORAGE_ROOT": str(root / "storage"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DO_NOT_TRACK": "1",  # dag-factory's listener plugin, if installed, stays quiet
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of a command and all its children (Airflow, the JVM, Python workers).

    CPU time is what stays comparable when other processes share the cores.
    """
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed, _children_cpu() - cpu


BASELINE_DAG = """\
\"\"\"Baseline: the same Airflow path with a one-task DAG whose task does nothing.\"\"\"
import datetime as dt

from airflow.sdk import DAG, task

with DAG("bench_baseline", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)):

    @task(task_id="noop")
    def noop() -> None:
        return None

    noop()
"""


def baseline(root: Path, repeat: int) -> dict[str, list[float]]:
    """``airflow dags test`` of a plain one-task DAG (a no-op Python task): Airflow's own floor."""
    (root / "dags").mkdir(parents=True, exist_ok=True)
    (root / "dags" / "bench_baseline.py").write_text(BASELINE_DAG)
    env = {
        **home_env(root),
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    airflow = str(BIN / "airflow")
    if not (root / "airflow" / "airflow.db").exists():
        print("creating the baseline's Airflow DB ...", flush=True)
        run([airflow, "db", "migrate"], env, root)
    samples: dict[str, list[float]] = {}
    for _ in range(repeat):
        wall, cpu = run([airflow, "dags", "test", "bench_baseline"], env, root)
        state, duration = task_duration({"DAGSPEC_AIRFLOW_HOME": env["AIRFLOW_HOME"]}, "bench_baseline")
        assert state == "success", state
        for name, value in (
            ("baseline, airflow dags test: task duration (Airflow DB, wall)", duration),
            ("baseline, airflow dags test: whole command, wall", wall),
            ("baseline, airflow dags test: whole command, CPU", cpu),
        ):
            samples.setdefault(name, []).append(value)
            print(f"  {name}: {value:.3f} s", flush=True)
    return samples


def task_duration(env: dict[str, str], dag_id: str = DAG_ID) -> tuple[str, float]:
    """(state, duration in s) of the task ``noop`` in the latest run, from the Airflow DB."""
    db = Path(env["DAGSPEC_AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(db) as con:
        state, duration = con.execute(
            "SELECT ti.state, ti.duration FROM task_instance ti JOIN dag_run dr "
            "ON ti.dag_id = dr.dag_id AND ti.run_id = dr.run_id "
            "WHERE ti.dag_id = ? AND ti.task_id = ? ORDER BY dr.id DESC LIMIT 1",
            (dag_id, STAGE),
        ).fetchone()
    return state, float(duration)


def airflow_env(env: dict[str, str], home: Path) -> dict[str, str]:
    """The variables ``dagspec run`` wrote to ``.dagspec/env``, for plain ``airflow`` commands."""
    extra = {}
    for line in (home / ".dagspec" / "env").read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            extra[key] = shlex.split(value)[0] if value else ""
    return {**env, **extra}


def resolved_stage_json(home: Path, env: dict[str, str]) -> str:
    from dagspec.plan.resolve import default_context, resolve_pipeline
    from dagspec.spec.loader import load_spec

    os.environ["DAGSPEC_STORAGE_ROOT"] = env["DAGSPEC_STORAGE_ROOT"]
    spec = load_spec(home / "pipelines" / f"{DAG_ID}.yaml")
    return resolve_pipeline(spec, default_context(spec), home=home)[STAGE].to_json()


def operator_hit(home: Path, env: dict[str, str]) -> Callable[[], float]:
    """A callable timing one in-process ``execute`` of the operator on a checkpoint hit."""
    os.environ.update({k: env[k] for k in ("DAGSPEC_HOME", "DAGSPEC_STORAGE_ROOT", "DAGSPEC_PIPELINES")})
    from dagspec.airflow.compiler import compile_pipeline
    from dagspec.spec.loader import load_spec

    dag = compile_pipeline(load_spec(home / "pipelines" / f"{DAG_ID}.yaml"), home=home)
    task = dag.get_task(STAGE)
    context: dict[str, Any] = {"params": {"force": False}}

    def once() -> float:
        start = time.perf_counter()
        out = task.execute(context)
        elapsed = time.perf_counter() - start
        assert str(out).endswith(json.loads(resolved_stage_json(home, env))["fingerprint"]), out
        return elapsed

    return once


def print_table(samples: dict[str, list[float]], rounds: int) -> None:
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} CPUs, rounds={rounds}\n")
    print("| measurement | median s | min-max s | runs |")
    print("|---|---:|---:|---:|")
    for name, xs in samples.items():
        print(f"| {name} | {statistics.median(xs):.3f} | {min(xs):.3f}-{max(xs):.3f} | {len(xs)} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds (median reported)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary project home")
    parser.add_argument("--home", type=Path, help="reuse (or create) this project home; never deleted")
    parser.add_argument("--baseline", type=Path, help="only run the plain one-task DAG baseline in this folder")
    args = parser.parse_args(argv)

    if args.baseline:
        print_table(baseline(args.baseline.resolve(), args.repeat), args.repeat)
        return 0

    if args.home:
        root, home = args.home, args.home.resolve()
        env = make_home(home) if not (home / "pipelines").exists() else home_env(home)
    else:
        root = Path(tempfile.mkdtemp(prefix="dagspec-overhead-"))
        home = root / "home"
        env = make_home(home)
    dagspec = [str(BIN / "dagspec"), "run", f"pipelines/{DAG_ID}.yaml"]
    print(f"project home {home}; first run (creates the Airflow DB and the checkpoint) ...", flush=True)
    run(dagspec, env, home)
    state, _ = task_duration(env)
    assert state == "success", state
    af_env = airflow_env(env, home)
    stage_json = resolved_stage_json(home, env)
    submit = [str(BIN / "spark-submit"), "--master", "local[1]", "--driver-memory", "1g"]
    submit += ["--conf", "spark.ui.enabled=false", str(REPO / "jobs" / "run_stage.py"), "--force", stage_json]
    op_hit = operator_hit(home, env)

    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)
        print(f"  {name}: {value:.3f} s", flush=True)  # partial results survive an interrupted run

    for rnd in range(args.repeat):
        # The hit runs come right after a run that committed the checkpoint, in both orders.
        add("hit, operator in-process: execute() wall", op_hit())
        wall, cpu = run(dagspec, env, home)
        state, duration = task_duration(env)
        assert state == "success", state
        add("hit, dagspec run: task duration (Airflow DB, wall)", duration)
        add("hit, dagspec run: whole command, wall", wall)
        add("hit, dagspec run: whole command, CPU", cpu)
        wall, cpu = run([str(BIN / "airflow"), "tasks", "test", DAG_ID, STAGE], af_env, home)
        add("hit, airflow tasks test: whole command, wall", wall)
        add("hit, airflow tasks test: whole command, CPU", cpu)
        wall, cpu = run([*dagspec, "--force"], env, home)
        state, duration = task_duration(env)
        assert state == "success", state
        add("no-op, dagspec run --force: task duration (Airflow DB, wall)", duration)
        add("no-op, dagspec run --force: whole command, wall", wall)
        add("no-op, dagspec run --force: whole command, CPU", cpu)
        wall, cpu = run(submit, env, home)
        add("no-op, spark-submit run_stage.py alone: wall", wall)
        add("no-op, spark-submit run_stage.py alone: CPU", cpu)
        print(f"round {rnd + 1}/{args.repeat} done", flush=True)

    print_table(samples, args.repeat)
    if not args.keep and not args.home:
        subprocess.run(["rm", "-rf", str(root)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
