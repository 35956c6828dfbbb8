"""Incremental days: what a new day costs with partitions, against rereading every day.

One ``local[2]`` session, ``--days + 1`` generated Criteo day files of ``--rows-per-day`` lines
(seed 1; kept in ``--work`` and reused). The spec is ctr_daily's data part: ``raw`` (read, format
criteo) and ``hashed`` (ctr_features, hashed), both partitioned by day file. Through the real
runtime and commit protocol (``run_partitions``/``run_stage``), timed with the wall clock and the
CPU seconds of the Spark JVM:

1. **full**: the first ``--days`` days, every partition computed (once);
2. **new day**: one more day file lands; the run computes its partitions only (``--repeat`` times:
   the new day's checkpoints are removed before each);
3. **reread**: the same two stages not partitioned, reading all ``--days + 1`` files (what every
   run cost before partitions), forced, ``--repeat`` times, interleaved with 2.

``--train``: also XGBoost on a window of the newest 7 days before the last (``last: 7,
skip_last: 1``) after the new day, against the same model trained on the same rows read as one table.

``--many N`` instead measures planning with N one-line day files: ``resolve_pipeline`` (each task
does it), ``dagspec show`` (a subprocess) and compiling the spec's DAG (what DAG parsing does).

Usage: ``.venv/bin/python bench/partitions.py [--days 10] [--rows-per-day 1000000] [--repeat 3]``,
``.venv/bin/python bench/partitions.py --many 1000``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from read_speed import jvm_cpu_seconds  # noqa: E402  (bench/ is no package)

PARTITIONED = """
dag_id: days
partitions: {{files: "{live}/day_{{day}}.tsv", parallel: {parallel}}}
stages:
  raw: {{kind: read, partitioned: true, params: {{format: criteo, path: "{{{{ partition.path }}}}"}}}}
  hashed: {{kind: ctr_features, partitioned: true, inputs: {{data: raw}}, params: {{mode: hashed, hash_bits: 18, log1p: true}}}}
  xgb: {{kind: train_xgboost, inputs: {{train: {{stage: hashed, last: 7, skip_last: 1}}}}, params: {{workers: 1, num_round: 50, nthread: 2}}}}
"""
WHOLE = """
dag_id: days_whole
stages:
  raw: {{kind: read, params: {{format: criteo, path: "{live}/day_*.tsv"}}}}
  hashed: {{kind: ctr_features, inputs: {{data: raw}}, params: {{mode: hashed, hash_bits: 18, log1p: true}}}}
"""


def _spec(work: Path, name: str, text: str) -> Any:
    from dagspec.spec.loader import load_spec

    path = work / "pipelines" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return load_spec(path)


def _timed(spark: Any, spec: Any, names: tuple[str, ...], *, force: bool = False) -> dict[str, Any]:
    """Run the named stages in order (each resolved after the ones before it); wall and JVM CPU per stage."""
    from dagspec.job.partitions import run_partitions
    from dagspec.job.runtime import run_stage
    from dagspec.plan.resolve import default_context, resolve_pipeline

    def fail(part: Any, exc: Exception) -> None:
        raise exc

    out: dict[str, Any] = {}
    for name in names:
        stage = resolve_pipeline(spec, default_context(spec, {}))[name]
        cpu0, t0 = jvm_cpu_seconds(), time.perf_counter()
        if stage.partitioned:
            run_partitions(spark, stage, force=force, report=fail)
            rows = sum(
                int((p.checkpoint.manifest() or {}).get("rows", {}).get("data", 0)) for p in stage.partitions.values()
            )
        else:
            rows = int(run_stage(spark, stage, force=force).manifest.get("rows", {}).get("data", 0))
        out[name] = {
            "wall_s": round(time.perf_counter() - t0, 2),
            "jvm_cpu_s": round(jvm_cpu_seconds() - cpu0, 2),
            "rows": rows,
        }
    return out


def incremental(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from dagspec.kinds.ctr.logs_generator import write_criteo_logs

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    work = Path(args.work)
    logs = work / f"logs_{args.days + 1}x{args.rows_per_day}"
    if not (logs / f"day_{args.days:02d}.tsv").exists():
        write_criteo_logs(
            spark, str(logs), rows=args.rows_per_day * (args.days + 1), days=args.days + 1, seed=1, partitions_per_day=2
        )
    live = work / "live"
    shutil.rmtree(live, ignore_errors=True)
    shutil.rmtree(work / "storage", ignore_errors=True)
    live.mkdir(parents=True)
    os.environ["DAGSPEC_STORAGE_ROOT"] = str(work / "storage")
    for day in range(args.days):
        (live / f"day_{day:02d}.tsv").symlink_to(logs / f"day_{day:02d}.tsv")
    parts = _spec(work, "days", PARTITIONED.format(live=live, parallel=args.parallel))
    whole = _spec(work, "days_whole", WHOLE.format(live=live))
    results: dict[str, Any] = {"full": _timed(spark, parts, ("raw", "hashed"))}
    new = f"{args.days:02d}"  # the key the glob's {day} captures
    (live / f"day_{new}.tsv").symlink_to(logs / f"day_{new}.tsv")
    results["new_day"], results["reread"] = [], []
    for _ in range(args.repeat):
        for stage in ("raw", "hashed"):
            shutil.rmtree(work / "storage" / "days" / stage / "_partitions" / new, ignore_errors=True)
        results["new_day"].append(_timed(spark, parts, ("raw", "hashed")))
        results["reread"].append(_timed(spark, whole, ("raw", "hashed"), force=True))
    if args.train:
        results["train_window"] = _timed(spark, parts, ("xgb",))
    spark.stop()
    return results


def many(args: argparse.Namespace) -> dict[str, Any]:
    from dagspec.airflow.compiler import compile_pipeline
    from dagspec.plan.resolve import default_context, resolve_pipeline

    work = Path(args.work) / f"many_{args.many}"
    days = work / "days"
    if not days.is_dir():
        days.mkdir(parents=True)
        for day in range(args.many):
            (days / f"day_{day:04d}.tsv").write_text("0\t1" + "\t" * 38 + "\n")
    os.environ["DAGSPEC_STORAGE_ROOT"] = str(work / "storage")
    spec = _spec(work, "days", PARTITIONED.format(live=days, parallel=2))
    timings: dict[str, list[float]] = {"plan_s": [], "show_s": [], "compile_s": []}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        plan = resolve_pipeline(spec, default_context(spec, {}))
        timings["plan_s"].append(round(time.perf_counter() - t0, 3))
        assert len(plan["hashed"].partitions) == args.many
        t0 = time.perf_counter()
        subprocess.run(
            [str(Path(sys.executable).parent / "dagspec"), "show", str(work / "pipelines" / "days.yaml")],
            check=True,
            capture_output=True,
        )
        timings["show_s"].append(round(time.perf_counter() - t0, 3))
        t0 = time.perf_counter()
        compile_pipeline(spec, home=REPO)
        timings["compile_s"].append(round(time.perf_counter() - t0, 4))
    return {k: {"runs": v, "median": statistics.median(v)} for k, v in timings.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--rows-per-day", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2, help="partitions computed at once")
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--many", type=int, default=0, help="measure planning with this many one-line partitions")
    parser.add_argument("--work", default=str(REPO / ".dagspec" / "bench-partitions"))
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results = many(args) if args.many else incremental(args)
    print(json.dumps({"args": vars(args), "load_before": load, "load_after": os.getloadavg()[0], **results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
