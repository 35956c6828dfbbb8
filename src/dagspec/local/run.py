"""``dagspec show``, ``run`` and ``init``: plan a spec, run it through ``airflow dags test``, set up Airflow."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from dagspec.airflow.client_process import AHEAD_VAR
from dagspec.errors import DagspecError
from dagspec.job.connect_server import ServerSettings, answering, ensure_server
from dagspec.kinds.catalog import load_catalog
from dagspec.local.airflow_env import (
    airflow_env,
    connection_env_var,
    local_connections,
    local_mode,
    prepare_local_airflow,
    short_airflow_argv,
    uses_local_server,
)
from dagspec.local.progress_view import follow_progress
from dagspec.local.project import (
    absolute_root,
    display,
    load,
    no_run_cause,
    parse_overrides,
    require_own_dag,
    require_project,
)
from dagspec.local.summary import counts, result_lines, stage_outcomes, task_line
from dagspec.plan.failure import failure_line, find_failures
from dagspec.plan.modes import execution_mode, is_server_on_this_machine
from dagspec.plan.partitions import PARALLEL_VAR, shown_keys
from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import ResolvedInput, ResolvedStage, default_context, resolve_pipeline
from dagspec.plan.resolved import PARTITIONS_DIR
from dagspec.spec.loader import pipelines_dir
from dagspec.spec.models import FORCE_PARAM, PipelineSpec
from dagspec.spec.partitions import PARTITIONS_PARAM
from dagspec.storage import project_home


class _ServerStart(threading.Thread):
    """The local Spark Connect server started in the background (``ensure_server``); ``error`` if it failed."""

    def __init__(self, home: Path) -> None:
        super().__init__(name="connect-server-start", daemon=True)
        self.home = home
        self.error: DagspecError | OSError | None = None

    def run(self) -> None:
        try:
            ensure_server(self.home)
        except (DagspecError, OSError) as error:  # reported after the run, whose first stage meets it too
            self.error = error


def connection_facts(conn_id: str, home: Path) -> tuple[str, bool]:
    """The type of connection ``conn_id`` as a local run would see it (environment, local DB,
    default), and whether it is a Connect server on this machine."""
    text = os.environ.get(connection_env_var(conn_id), "").strip()
    if text.startswith("{"):
        conn = json.loads(text)
        return str(conn.get("conn_type", "")), is_server_on_this_machine(conn.get("host"), conn.get("extra") or {})
    if text:
        host = text.partition("://")[2].split("@")[-1]
        return text.partition("://")[0].replace("-", "_"), is_server_on_this_machine(host, {})
    db = Path(airflow_env(home)["AIRFLOW_HOME"]) / "airflow.db"
    if db.exists():
        with sqlite3.connect(db, timeout=10) as con:
            row = con.execute("SELECT conn_type, host, extra FROM connection WHERE conn_id = ?", (conn_id,)).fetchone()
        if row:
            # the host decides: the extra may be stored encrypted (Airflow's fernet key)
            return str(row[0]), is_server_on_this_machine(row[1], {})
    default = local_connections(local_mode())[""]
    return str(default["conn_type"]), is_server_on_this_machine(default.get("host"), default.get("extra") or {})


def stage_rows(spec: PipelineSpec, overrides: dict[str, Any], storage_root: str | None) -> list[dict[str, Any]]:
    """Per stage: name, kind, inputs, fingerprint, state, reasons, mode, output path (for ``show``)."""
    plan = resolve_pipeline(spec, default_context(spec, overrides), storage_root=storage_root)
    forced = bool(overrides.get(FORCE_PARAM))
    home = project_home()
    catalog = load_catalog(home)
    conn_type, on_this_machine = connection_facts(spec.spark.conn_id, home)
    rows = []
    for stage in plan.values():
        status = stage_status(stage, forced=forced)
        definition = catalog.get(stage.kind)
        mode = (
            execution_mode(
                definition,
                stage.conf,
                conn_type,
                spec.spark.conn_id,
                params=stage.params,
                server_on_this_machine=on_this_machine,
            )
            if definition
            else None
        )
        rows.append(
            {
                "name": stage.name,
                "kind": stage.kind,
                "matrix": {"stage": spec.written_stage(stage.name), "values": spec.matrix_of(stage.name)}
                if spec.matrix_of(stage.name)
                else None,
                # another spec's output as <dag_id>.<stage>.<output>, its asset name
                "inputs": {role: _input_shown(i) for role, i in _shown_inputs(stage).items()},
                "fingerprint": stage.fingerprint,
                "provisional": bool(stage.pending),  # decided once the pending upstream stages commit
                "state": status.state,
                "reasons": status.reasons,
                "mode": mode.mode if mode else None,
                "mode_reason": mode.reason if mode else None,
                "output": f"{stage.stage_dir}/{PARTITIONS_DIR}/<key>/" if stage.partitioned else stage.checkpoint_dir,
                "partitions": {k: stage_status(p, forced=forced).state for k, p in stage.partitions.items()}
                if stage.partitioned
                else None,
            }
        )
    return rows


def _shown_inputs(stage: ResolvedStage) -> dict[str, ResolvedInput]:
    """A stage's inputs; a partitioned stage's: those of a partition (each reads its own)."""
    first = next(iter(stage.partitions.values()), None)
    return first.inputs if stage.partitioned and first is not None else stage.inputs


def _input_shown(source: ResolvedInput) -> str:
    """An input as ``show`` prints it: ``stage.output``, another spec's as its asset name, a window
    with the partitions it reads."""
    name = f"{source.spec + '.' if source.spec else ''}{source.stage}.{source.output}"
    if source.partition:
        return f"{name}[its partition]"
    if source.is_window:
        keys = [p.partition for p in source.parts]
        return f"{name}[{shown_keys(keys, 4) if keys else 'none yet'}]"
    return name


def cmd_show(args: argparse.Namespace) -> int:
    """Print every stage with its fingerprint, state and the reasons it will run."""
    home = project_home()
    spec = load(Path(args.spec), home)
    try:
        require_own_dag(Path(args.spec), home)
    except DagspecError as exc:  # the plan below is still this file's
        print(f"warning: {exc} (`dagspec run` refuses this spec)", file=sys.stderr)
    rows = stage_rows(spec, parse_overrides(args.param, spec), absolute_root(args.storage_root))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{spec.dag_id}: {spec.description or ''}")
    for row in rows:
        inputs = ", ".join(f"{k}={v}" for k, v in row["inputs"].items()) or "-"
        fingerprint = f"~{row['fingerprint']}" if row["provisional"] else f" {row['fingerprint']}"
        print(f"  {row['name']:20} {row['kind']:22}{fingerprint}  {row['state']:7}  in: {inputs}")
        if row["matrix"]:
            values = ", ".join(f"{k}={v}" for k, v in row["matrix"]["values"].items())
            print(f"  {'':20}   matrix stage {row['matrix']['stage']}: {values}")
        for reason in row["reasons"]:
            print(f"  {'':20}   - {reason}")
        if row["mode"]:
            print(f"  {'':20}   mode: {row['mode']} ({row['mode_reason']})")
        print(f"  {'':20} -> {row['output']}")
    return 0


def every_stage_hits(spec: PipelineSpec, overrides: dict[str, Any]) -> bool:
    """Whether every stage's checkpoint is committed now (the run would compute nothing)."""
    if overrides.get(FORCE_PARAM):
        return False
    try:
        plan = resolve_pipeline(spec, default_context(spec, overrides))
    except DagspecError:
        return False  # params that depend on the run (ds, run_id): known only inside it
    return all(stage_status(stage).done for stage in plan.values())


def _last_run_id(db: Path, dag_id: str) -> tuple[int, str | None]:
    with sqlite3.connect(db, timeout=60) as con:
        row = con.execute(
            "SELECT id, run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)
        ).fetchone()
    return (int(row[0]), str(row[1])) if row else (0, None)


def _run_states(db: Path, dag_id: str, run_id: str | None) -> tuple[str | None, list[tuple[str, str, float]]]:
    if run_id is None:
        return None, []
    with sqlite3.connect(db, timeout=60) as con:
        row = con.execute("SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)).fetchone()
        tasks = con.execute(
            "SELECT task_id, state, COALESCE(duration, 0) FROM task_instance WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        ).fetchall()
    return (row[0] if row else None), [(t, s or "none", float(d)) for t, s, d in tasks]


def dags_test(dag_id: str, conf: dict[str, Any], env: dict[str, str], log: IO[str] | None) -> tuple[int, str | None]:
    """``airflow dags test`` of one DAG; returns its exit code and the run it created.

    ``dags test`` first writes the parsed DAG (and its assets) to the metadata DB; two of them
    doing that at once for a new DAG collide on SQLite (a unique constraint on the asset table).
    Starts are therefore serialized by a lock on the Airflow home, held until this run's DagRun
    exists; the runs themselves proceed concurrently.
    """
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with (Path(env["AIRFLOW_HOME"]) / "dagspec-start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        before, _ = _last_run_id(db, dag_id)
        argv = short_airflow_argv(["dags", "test", dag_id, "--conf", json.dumps(conf)])
        # all tasks of the run share the process: each starts the next stage's client ahead
        process = subprocess.Popen(
            argv, env={**os.environ, **env, AHEAD_VAR: "1"}, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        run_id = None
        while process.poll() is None:
            newest, newest_run = _last_run_id(db, dag_id)
            if newest > before:
                run_id = newest_run
                break
            time.sleep(0.2)
    code = process.wait()
    if run_id is None:
        newest, newest_run = _last_run_id(db, dag_id)
        run_id = newest_run if newest > before else None
    return code, run_id


def cmd_run(args: argparse.Namespace) -> int:
    """Run a spec locally through ``airflow dags test`` and print each task's state and the reports."""
    home = project_home()
    spec_path = Path(args.spec).resolve()
    require_project(home, spec_path)  # before the spec: outside the project its plugin kinds are unknown
    spec = load(spec_path, home)
    # `dags test` runs the DAG the DAG file compiles from the spec's folder under this dag_id:
    # it must be this file's (no other spec of the folder has the dag_id or its export folders)
    require_own_dag(spec_path, home)
    overrides = parse_overrides(args.param, spec)
    if args.force:
        overrides[FORCE_PARAM] = True
    if getattr(args, "scope", None):  # dagspec backfill
        if spec.partitions is None:
            raise DagspecError(f"{display(spec_path, home)} declares no partitions: there is nothing to backfill")
        overrides[PARTITIONS_PARAM] = args.scope
        print(f"backfill of partitions {args.scope}: the partitioned stages compute what is missing or stale there")
    if getattr(args, "parallel", None):
        os.environ[PARALLEL_VAR] = str(args.parallel)
    if spec_path.parent != pipelines_dir(home).resolve():
        os.environ["DAGSPEC_PIPELINES"] = str(spec_path.parent)
    if args.storage_root:
        os.environ["DAGSPEC_STORAGE_ROOT"] = absolute_root(args.storage_root) or ""
    if args.mode:
        os.environ["DAGSPEC_MODE"] = args.mode
    env = prepare_local_airflow(home, [spec.spark.conn_id])
    starting: _ServerStart | None = None
    if uses_local_server(env, spec.spark.conn_id):
        if not answering(ServerSettings.from_env().port) and every_stage_hits(spec, overrides):
            # starting it would cost a JVM (~10 s of CPU) for nothing; a stage that runs after all
            # starts it itself (dagspec.job.main). Checked only when it is down: the plan costs CPU too
            print("Spark Connect server: not started, every stage's checkpoint is committed")
        elif answering(ServerSettings.from_env().port):
            print(f"Spark Connect server: {ensure_server(home)} (`dagspec connect down` stops it)")
        else:  # its JVM starts while Airflow starts; the first stage waits for it (the start's lock)
            starting = _ServerStart(home)
            starting.start()
            print(
                f"Spark Connect server: starting at {ServerSettings.from_env().url} (`dagspec connect down` stops it)"
            )
    log_dir = home / ".dagspec" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{spec.dag_id}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    print(
        f"running {spec.dag_id} ({len(spec.stages)} stages) through `airflow dags test`; log: {display(log_path, home)}"
    )
    started = time.time()
    with log_path.open("w") as log, contextlib.nullcontext() if args.verbose else follow_progress(log_path):
        code, run_id = dags_test(spec.dag_id, overrides, env, None if args.verbose else log)
    if starting is not None:
        starting.join()
        if starting.error is not None:
            print(f"error: the Spark Connect server did not start: {starting.error}", file=sys.stderr)
    if run_id is None:  # no run at all: the cause first, never a `None` state
        lines = [] if args.verbose else log_path.read_text().splitlines()
        tail = ["--- last lines of the log ---", *lines[-40:]] if lines else []
        print("\n".join([f"error: {no_run_cause(spec.dag_id, code, home, lines)}", *tail]), file=sys.stderr)
        return 1
    state, tasks = _run_states(Path(env["AIRFLOW_HOME"]) / "airflow.db", spec.dag_id, run_id)
    order = {name: i for i, name in enumerate(spec.stage_order())}
    # a successful run's stages: `hit` (the checkpoint was there) or `ran`, from their manifests
    outcomes = stage_outcomes(spec, overrides, started) if state == "success" and code == 0 else None
    for task_id, task_state, duration in sorted(tasks, key=lambda t: order.get(t[0], 0)):
        print(task_line(task_id, task_state, duration, (outcomes or {}).get(task_id), home))
    tally = f"; {counts(outcomes)}" if outcomes else ""
    print(f"{spec.dag_id}: {state} in {time.time() - started:.1f} s{tally}")
    if state != "success" or code != 0:
        if not args.verbose:
            lines = log_path.read_text().splitlines()
            # the root cause of each failed stage first, located in the spec; the tail below it
            causes = [failure_line(spec, failure) for failure in find_failures(lines)]
            print("\n".join([*causes, "--- last lines of the log ---", *lines[-40:]]), file=sys.stderr)
        return 1
    if outcomes is None:
        return 0  # params that depend on the run (ds, run_id) cannot be resolved here
    # the plan stage_outcomes resolved once: no second resolve (code hashes, library versions) here
    print("checkpoints (manifest.json in each; `dagspec head`/`describe` SPEC STAGE look inside):")
    for name, outcome in outcomes.items():
        print(f"  {name:24} {outcome.checkpoint}")
    for line in result_lines(outcomes, home):
        print(line)
    _print_reports(spec, {name: outcome.checkpoint for name, outcome in outcomes.items()})
    return 0


def _print_reports(spec: PipelineSpec, checkpoints: dict[str, str]) -> None:
    """Show the markdown reports (metrics tables) that the final stages wrote."""
    consumed = {ref.partition(".")[0] for stage in spec.stages.values() for ref in stage.stage_refs().values()}
    for name, output in checkpoints.items():
        if name in consumed or "://" in output:
            continue
        for report in sorted(Path(output).glob("*/*.md")):
            print(f"\n{report}:\n{report.read_text()}")


def cmd_backfill(args: argparse.Namespace) -> int:
    """``dagspec run`` limited to the partitions ``--from``..``--to``: only the partitioned stages run,
    each computing the partitions of the range that are missing or stale, ``--parallel`` at once."""
    args.scope = f"{args.from_ or ''}..{args.to or ''}"
    return cmd_run(args)


def cmd_init(args: argparse.Namespace) -> int:
    """Create the local Airflow home and ``.dagspec/env``."""
    home = project_home()
    env = prepare_local_airflow(home, args.conn_id or ["spark_default"])
    print(f"Airflow home: {env['AIRFLOW_HOME']}\nnow: source {display(home / '.dagspec' / 'env', home)}")
    return 0
