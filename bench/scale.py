"""How dagspec's pipelines scale with rows: per stage wall, CPU, rows/s per core, peak RSS, shuffle, spill.

    .venv/bin/python bench/scale.py run ctr --size 1000000 --out bench/results/scale.jsonl
    .venv/bin/python bench/scale.py run ctr --size 10000000 --engines xgb_single --out ...
    .venv/bin/python bench/scale.py run physics --size 1000000 --out ...
    .venv/bin/python bench/scale.py report bench/results/scale.jsonl --plots bench/results/scale

``run`` runs one pipeline at one size through ``dagspec run`` (real ``airflow dags test``, every stage
in its local default mode) into its own storage root, and appends one JSON row per stage to
``--out`` (plus a ``_run`` row for the whole command):

- ``ctr``: pipelines/criteo_ctr.yaml with ``sizes: [size]`` on generated logs: day files of
  1.1 x ``--test-rows`` rows (default min(size, 10^6)), as many train days as hold 1.1 x ``size``,
  and the last day as the test set. ``--engines`` keeps those models (their train and evaluate stages; the stages no kept
  stage reads are left out of the bench's copy of the spec, and so is ``best_gate``, whose input
  is the 100,000-row point).
- ``physics``: pipelines/topology_classifier.yaml's data stages (events, features, check,
  undersample, split, both exports) at ``size`` events, ``max_particles`` 40; ``--with-model`` adds
  the HLF model for one epoch.

The project home (``--home``: its own Airflow home and SQLite DB, migrated once and reused by later
runs; ``dags/`` and ``jobs/`` link to this checkout) gets its own Spark Connect server on a free
port for each run, stopped at the end, with Spark event logs on (``SPARK_CONF_DIR``), so every
run starts from a fresh server JVM. ``--reuse-env`` instead uses the caller's Airflow home and
Connect server (the test suite's smoke; shuffle bytes are then not read). ``--master`` picks the
server's master (``local[1]``, ``local[2]``, a standalone cluster's ``spark://...``; the own-driver
stages, LR and RF, are spark-submitted to the same master, and on a cluster its executors are sampled
too) for the time-against-cores curve:

    .venv/bin/python bench/scale.py run ctr --size 1000000 --engines lr --master 'local[1]' --out ...
    .venv/bin/dagspec cluster up   # two workers of one core each; then --master spark://127.0.0.1:7077

Per stage: the task's wall as Airflow records it, the stage's own time (its manifest), CPU seconds
of every process involved inside the stage's window (``/proc`` of the ``dagspec run`` tree and the
server's tree, sampled twice a second: the Airflow process, the stage's client or spark-submit
driver, the server JVM, its Python workers, executors), rows per CPU second, peak RSS per role
(one process, and all processes of a role together), shuffle and spill bytes of the Spark tasks
that finished in the window (event logs). ``report`` prints the tables, the log-log slope of
time against rows per stage between the two largest sizes, and draws the plots.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_probe import (
    ProcessSampler,
    connect_server_pids,
    executor_pids,
    spark_task_metrics,
    stage_manifests,
    stage_rows,
)

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENGINE_STAGES = {e: (e, f"eval_{e}") for e in ("xgb_single", "xgb_spark", "lr", "rf", "vw")}
PHYSICS_DATA = ("events", "features", "features_checked", "balanced", "split", "train_parquet", "test_parquet")
EVENT_LOG_CONF = """\
spark.eventLog.enabled true
spark.eventLog.dir file://{dir}
spark.eventLog.compress false
spark.eventLog.rolling.enabled false
"""


def _upstream(ref: str | dict[str, object]) -> str:
    """The stage an input reads: 'stage.output', or a window's {stage: ...}."""
    return str(ref["stage"] if isinstance(ref, dict) else ref).split(".", 1)[0]


def _keep_closure(stages: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    """The stages ``targets`` read, transitively (spec order kept)."""
    keep, todo = set(), list(targets)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(_upstream(r) for r in (stages[name].get("inputs") or {}).values())
    return {n: s for n, s in stages.items() if n in keep}


def bench_spec(pipeline: str, engines: list[str], with_model: bool) -> dict[str, Any]:
    """The bench's copy of the pipeline's spec: the same stages and params, restricted as documented."""
    if pipeline == "ctr":
        spec: dict[str, Any] = yaml.safe_load((REPO / "pipelines" / "criteo_ctr.yaml").read_text())
        stages = spec["stages"]
        for engine, names in ENGINE_STAGES.items():
            if engine not in engines:
                for name in names:
                    del stages[name]
                del stages["report"]["inputs"][engine]
        stages.pop("best_gate")
        spec["stages"] = _keep_closure(stages, ["report"])
    else:
        spec = yaml.safe_load((REPO / "pipelines" / "topology_classifier.yaml").read_text())
        spec["stages"] = _keep_closure(spec["stages"], [*PHYSICS_DATA, *(["hlf_classifier"] if with_model else [])])
    spec["default_args"] = {**spec.get("default_args", {}), "retries": 0}  # a failure is a result here
    return spec


def run_params(args: argparse.Namespace) -> dict[str, Any]:
    if args.pipeline == "physics":
        return {"events": args.size, "max_particles": 40, "epochs": 1}
    day = math.ceil(1.1 * args.test_rows)
    train_days = math.ceil(1.1 * args.size / day)
    return {
        "gen_rows": day * (train_days + 1),
        "gen_days": train_days + 1,
        "sizes": sorted({*(args.sizes or []), args.size}),
        "test_rows": args.test_rows,
        "engines": args.engines,
        "xgb_rounds": args.xgb_rounds,
        "rf_trees": args.rf_trees,
        "hash_bits": 17,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment(args: argparse.Namespace, work: Path) -> dict[str, str]:
    """The run's environment: the private home's (default) or the caller's (``--reuse-env``)."""
    env = {**os.environ, "DAGSPEC_PIPELINES": str(work / "pipelines"), "DAGSPEC_STORAGE_ROOT": str(work / "storage")}
    if args.reuse_env:
        return env
    home: Path = args.home
    if not (home / "dags").exists():
        (home / "dags").mkdir(parents=True)
        (home / "dags" / "dagspec_pipelines.py").symlink_to(REPO / "dags" / "dagspec_pipelines.py")
        (home / "plugins").mkdir()
    jobs = home / "jobs"  # the snapshot's run_stage.py
    if jobs.is_symlink() or jobs.exists():
        jobs.unlink()
    # the run imports dagspec from a snapshot of HEAD: others edit this checkout meanwhile, and a
    # changed code hash restarts the Connect server mid-run (a stage in flight then fails)
    code = home / "code" / _head()
    if not (code / "src").is_dir():
        code.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "HEAD", "src", "jobs"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True)
    (work / "conf").mkdir(parents=True, exist_ok=True)
    (work / "events").mkdir(exist_ok=True)
    (work / "conf" / "spark-defaults.conf").write_text(EVENT_LOG_CONF.format(dir=work / "events"))
    jobs.symlink_to(code / "jobs")
    keep = {k: v for k, v in env.items() if not k.startswith(("AIRFLOW", "DAGSPEC_"))}
    # --mode spark: every stage spark-submitted to the master, as `dagspec cluster up` advises (a
    # Connect server would hold every core of a standalone cluster, and own-driver stages wait)
    if args.mode == "spark":
        keep.update(
            DAGSPEC_MODE="spark", AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": args.master})
        )
    return {
        **keep,
        "DAGSPEC_HOME": str(home),
        "DAGSPEC_AIRFLOW_HOME": str(home / ".dagspec" / "airflow"),
        "DAGSPEC_PIPELINES": env["DAGSPEC_PIPELINES"],
        "DAGSPEC_STORAGE_ROOT": env["DAGSPEC_STORAGE_ROOT"],
        "DAGSPEC_CONNECT_PORT": str(_free_port()),
        "DAGSPEC_CONNECT_MASTER": args.master,
        "SPARK_CONF_DIR": str(work / "conf"),
        "PYTHONPATH": str(code / "src"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "DO_NOT_TRACK": "1",
    }


def _head() -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _task_table(stdout: str) -> dict[str, tuple[str, float]]:
    """``{task_id: (state, seconds)}`` from the table ``dagspec run`` prints."""
    tasks = {}
    for line in stdout.splitlines():
        parts = line.split()
        if line.startswith("  ") and len(parts) >= 4 and parts[3] == "s":
            try:
                tasks[parts[0]] = (parts[1], float(parts[2]))
            except ValueError:
                continue
    return tasks


def _run_command(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[int | str, str, float]:
    """Run ``argv`` in its own process group (ours to stop on timeout); returns (code, output, wall)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    _run_command.pid = proc.pid  # type: ignore[attr-defined]
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        code = f"timeout after {timeout:.0f} s"
    return code, out, time.perf_counter() - t0


def run(args: argparse.Namespace) -> int:
    """One pipeline at one size; appends its rows to ``args.out``."""
    if args.pipeline == "ctr" and args.size > 1.1 * args.test_rows * 99:
        raise SystemExit("too many day files: raise --test-rows")
    if any(s > args.size for s in args.sizes or []):
        raise SystemExit("--sizes must not exceed --size (the generated days hold --size rows)")
    work: Path = args.work or args.home / "runs" / f"{args.pipeline}-{args.size}-{time.strftime('%Y%m%dT%H%M%S')}"
    (work / "pipelines").mkdir(parents=True, exist_ok=True)
    spec = bench_spec(args.pipeline, args.engines, args.with_model)
    params = run_params(args)
    for name, value in params.items():  # defaults, not -p: `sizes` shapes a matrix, fixed at parse time
        spec["params"][name]["default"] = value
    spec_path = work / "pipelines" / f"{spec['dag_id']}.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False, width=200))
    env = environment(args, work)
    argv = [str(BIN / "dagspec"), "run", str(spec_path), "--storage-root", str(work / "storage")]
    port = int(env.get("DAGSPEC_CONNECT_PORT", "15002"))
    cluster = args.master.startswith("spark://")

    def roots() -> set[int]:
        return {getattr(_run_command, "pid", -1), *connect_server_pids(port), *(executor_pids() if cluster else ())}

    sampler = ProcessSampler(roots, args.interval)
    load0, started = os.getloadavg(), time.time()
    print(f"{time.strftime('%H:%M:%S')} {args.pipeline} {args.size}: {' '.join(argv[1:])}", flush=True)
    sampler.start()
    try:
        code, out, wall = _run_command(argv, env, Path(env.get("DAGSPEC_HOME", REPO)), args.timeout)
    finally:
        sampler.stop()
        if not args.reuse_env:
            subprocess.run(
                [str(BIN / "dagspec"), "connect", "down"], env=env, cwd=args.home, capture_output=True, check=False
            )
    (work / "dagspec-run.log").write_text(out)
    tasks = _task_table(out)
    manifests = {n: m for n, m in stage_manifests(work / "storage").items() if m["window"][0] >= started - 1}
    spark = spark_task_metrics(work / "events", {n: m["window"] for n, m in manifests.items()})
    common = {
        "pipeline": args.pipeline,
        "size": args.size,
        "params": params,
        "run": work.name,
        "load_avg_start": [round(x, 2) for x in load0],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
        "master": args.master,
        "mode": args.mode,
        "code": env.get("PYTHONPATH", str(REPO / "src")),
    }
    rows = []
    for name in dict.fromkeys([*tasks, *manifests]):
        row: dict[str, Any] = {**common, "stage": name.split("__")[0], "task": name}
        row["state"], row["task_wall_s"] = tasks.get(name, ("?", None))
        manifest = manifests.get(name)
        if manifest:
            window = sampler.window(*manifest["window"])
            rows_n = stage_rows(manifests, name)
            row |= {
                "kind": manifest["kind"],
                "stage_s": manifest["duration_s"],
                "rows": rows_n,
                **window,
                "rows_per_cpu_s": round(rows_n / window["cpu_s"]) if rows_n and window["cpu_s"] else None,
                "client_peak_rss_mb_manifest": manifest.get("driver_peak_rss_mb"),
                **spark.get(name, {}),
            }
        rows.append(row)
    whole = sampler.window(started, time.time())
    rows.append(
        {
            **common,
            "stage": "_run",
            "task": "_run",
            "state": "success" if code == 0 else f"failed: {code}",
            "task_wall_s": round(wall, 1),
            **whole,
        }
    )
    from scale_curves import report_table

    report = report_table(work)
    if report:  # the run folder is scratch: the learning curve's rows travel with the measurements
        rows.append({**common, "stage": "_report", "task": "_report", "state": "success", "report_rows": report})
    with args.out.open("a") as sink:
        for row in rows:
            sink.write(json.dumps(row) + "\n")
    ran = sum(1 for r in rows if r.get("stage_s") is not None)
    print(
        f"{time.strftime('%H:%M:%S')} exit {code}, {wall:.0f} s, {ran} stages measured; log {work / 'dagspec-run.log'}",
        flush=True,
    )
    if code != 0:
        print(out[-3000:], flush=True)
    return 0 if code == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="one pipeline at one size")
    p.add_argument("pipeline", choices=["ctr", "physics"])
    p.add_argument("--size", type=int, required=True, help="train rows (ctr) or events (physics)")
    p.add_argument("--test-rows", type=int, help="ctr: test rows (default: min(size, 10^6))")
    p.add_argument(
        "--sizes", type=int, nargs="+", help="ctr: more train sizes (<= --size) in the same run: the learning curve"
    )
    p.add_argument("--engines", nargs="+", default=list(ENGINE_STAGES), choices=list(ENGINE_STAGES))
    p.add_argument("--xgb-rounds", type=int, default=200)
    p.add_argument("--rf-trees", type=int, default=160)
    p.add_argument("--with-model", action="store_true", help="physics: the HLF model for one epoch")
    p.add_argument(
        "--master",
        default="local[*]",
        help="the run's Connect server's master: local[*] (default), local[1], local[2], or a standalone "
        "cluster's spark://host:port (`dagspec cluster up`); rows of other masters than local[*] make "
        "the report's time-against-cores table",
    )
    p.add_argument(
        "--mode",
        choices=["connect", "spark"],
        default="connect",
        help="connect: stages are clients of the run's Connect server on --master; spark: every stage is"
        " spark-submitted to --master (a standalone cluster's cores go to one application at a time)",
    )
    p.add_argument("--home", type=Path, default=Path("/tmp/dagspec-scale"), help="the private project home")
    p.add_argument("--work", type=Path, help="this run's folder (default: <home>/runs/<pipeline>-<size>-<time>)")
    p.add_argument("--reuse-env", action="store_true", help="use the caller's Airflow home and Connect server")
    p.add_argument("--timeout", type=float, default=7200)
    p.add_argument("--interval", type=float, default=0.5, help="seconds between /proc samples")
    p.add_argument("--out", type=Path, required=True, help="JSON lines file the rows are appended to")
    r = sub.add_parser("report", help="tables, slopes and plots from the rows")
    r.add_argument("rows", type=Path, nargs="+")
    r.add_argument("--plots", type=Path, help="folder for the PNG plots")
    c = sub.add_parser("curves", help="the learning curves of several ctr runs (their report stages' tables)")
    c.add_argument(
        "runs",
        type=Path,
        nargs="+",
        help="the runs' folders (<home>/runs/ctr-<size>-<time>) or the JSON lines files scale.py run wrote",
    )
    c.add_argument("--plots", type=Path, required=True, help="folder for metrics.tsv, curves.json and the plots")
    j = sub.add_parser("project", help="core-hours and hours of a run over --rows rows, from the largest size")
    j.add_argument("rows_files", type=Path, nargs="+", metavar="rows")
    j.add_argument("--pipeline", choices=["ctr", "physics"], default="ctr")
    j.add_argument("--rows", type=float, default=4.4e9, help="rows (ctr) or events (physics) to project to")
    j.add_argument("--cores", type=int, nargs="+", default=[16, 64, 256, 1024])
    j.add_argument("--efficiency", type=float, default=0.8, help="parallel efficiency (time-against-cores runs)")
    args = parser.parse_args()
    if args.command == "project":
        from scale_projection import projection

        print(projection(args.rows_files, args.pipeline, args.rows, args.cores, args.efficiency))
        return 0
    if args.command == "run":
        # every stage's rows grow with the size up to 10^6 (a slope for the data stages too)
        args.test_rows = args.test_rows or min(args.size, 1_000_000)
        return run(args)
    if args.command == "curves":
        from scale_curves import curves

        print(curves(args.runs, args.plots))
        return 0
    from scale_report import report

    print(report(args.rows, args.plots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
