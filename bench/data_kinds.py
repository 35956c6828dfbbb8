"""Every data kind against the plain Spark code a user would write for the same rows.

One ``local[2]`` session (``local_spark``), ``--rows`` rows. Each kind runs as a stage of one spec
written into ``--work/pipelines/data_kinds.yaml``, through ``run_stage(..., force=True)`` (the code
path of every stage: the kind, the Parquet outputs, their row counts, the manifest, the commit),
beside its plain twin (``data_kinds_twins``), interleaved round by round (``--repeat``; the side
that goes first alternates), after ``--warmup`` untimed rounds (a cold JVM made the first stage
of a session 4x slower). Timed: the stage's ``duration_s`` and the wall around ``run_stage``,
the plain twin's wall; for both the CPU seconds of the Spark JVM (``read_speed.jvm_cpu_seconds``)
and, apart, of the Python processes (the PySpark workers under the JVM and this driver). Both
sides' output counts must agree (asserted every round; quarantine counts too).

Inputs, made once and kept in ``--work`` (none of it timed): the Criteo day file of ``--rows``
lines (``read_speed.make_logs``), read once by the stage ``criteo_in`` (``read`` format criteo):
the sampling, feature and export kinds and their twins read that Parquet checkpoint; a headered
csv and tsv of 20 of its columns (label, I1..I13, C1..C6); ``--events`` physics events from
``generate_physics_events`` (seed 42, up to 801 particles), the input of ``topology_features``.

Kinds, their twins, and what the twins leave out:

- ``read_criteo`` (``read`` format criteo): ``read_speed``'s twin, ``spark.read.csv`` with the
  Criteo schema, tab, PERMISSIVE and a corrupt-record column, written as Parquet. Leaves out the
  second scan that counts the lines against the rows written (and on a dirty file the rewrite
  with every rule, the per-reason counts and the quarantine folder).
- ``read_csv`` (inferred schema): ``spark.read.csv(header=True, inferSchema=True)`` to Parquet
  (two passes, as the kind's). Leaves out the corrupt column, the line count that tells whether a
  row was rejected, the row count from the footers and the (empty) quarantine write; it cannot count rejected lines (with an inferred
  schema only a wrong field count rejects one): the check is the kind's 0 on the clean file.
- ``read_tsv`` (a DDL schema): the reader with the schema and a corrupt column, to Parquet. Leaves
  out the line count, the row count and the (empty) quarantine write.
- ``generate_criteo_logs`` (1 day, seed 1): ``spark.range`` in 2 partitions, a Bernoulli label,
  13 log-normal integers and 26 power-law categoricals hashed to 8 hex digits with the kind's
  constants, each with its missing rate, ``concat_ws`` of 40 fields, ``repartition(1)`` to one
  text file. Leaves out the intercept's calibration (a 20,000-row sample to pandas and a
  bisection), the signal (per-value effects, interactions) and the label drawn from it, the
  co-missing groups and I8's negatives, the day partitioning, the rename to ``day_00.tsv`` and
  the folder swap, the observed click rate. Counts: lines, and fields in a line (40).
- ``sample`` (n = rows / 10): a count, a seeded ``rand()`` below n / N plus 6 standard
  deviations, ``orderBy(rand).limit(n)``. Leaves out the hash of every column that makes the draw
  independent of the partitioning, and the exact thresholds: the (rank, id) table kept on disk
  and counted in rank buckets.
- ``ctr_features_hashed`` (17 bits, log1p) and ``ctr_features_as_is``: the kind's expressions,
  hand-written: FeatureHasher over the log1p'd integers and the categoricals; ``conv`` from hex to
  signed ints. Leaves out the column check (and as_is' trim and hex check of each value).
- ``undersample``: per-class counts, ``sampleBy`` a little above minority / class count, a window
  per class in ``rand`` order cut at the minority count. Leaves out the row hash and the exact
  thresholds (as ``sample``); the null-label check is the grouped count both do.
- ``split`` (0.8 / 0.2, train shuffled): a ``rand()`` threshold, train sorted by ``rand``. Leaves
  out the row hash (over 40 columns, once per row and output; the shuffle orders by a hash of it). Counts cannot
  agree row for row: the draws differ. Asserted: the same total, and each output within 6
  standard deviations of the other side's (``randomSplit`` would sort every partition first).
- ``export_parquet`` (4 partitions) and ``export_csv`` (header): ``df.repartition(4).write.parquet``
  and ``df.write.csv(header=True)``. Leaves out the staging folder, the publish by renames with the
  fingerprint record, and (Parquet) the count of the written rows.
- ``topology_features`` (defaults: raw columns kept, no truncation): the seed's own code
  (``physics_features.seed_variant``: MinMaxScaler, OneHotEncoder, the row-at-a-time Python UDF
  with sklearn's StandardScaler), the "user" code this kind replaced. Leaves out the checks of the
  HLF sizes and labels; it writes vectors where the kind writes arrays. The twin's UDF runs in
  Python workers, which the JVM's CPU misses: read the all-CPU ratio (JVM + Python).

Usage: ``PYTHONPATH=src:bench .venv/bin/python bench/data_kinds.py [--rows 1000000] [--repeat 3]
[--warmup 1] [--events 10000] [--kinds sample split ...] [--work DIR] [--out results.json]``.
Besides the table, where each side's wall goes: its Spark jobs (count and seconds, from the
status store; the JSON has each job's call site) and the rest (planning, listing, driver work).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from data_kinds_twins import (
    EXPORT_PARTITIONS,
    HASH_BITS,
    SEED,
    SPLIT,
    TEXT_DDL,
    TWINS,
    Counts,
    Job,
    make_text_tables,
    sample_size,
    worker_cpu_seconds,
)
from local_spark import stage_session
from read_speed import jvm_cpu_seconds, make_logs

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

CTR_INPUT, PHYSICS_INPUT = "criteo_in", "events"
# kind -> what its stage and twin read: a file made here (logs, csv, tsv), an input stage's data, or nothing
SOURCES = {
    "read_criteo": "logs", "read_csv": "csv", "read_tsv": "tsv", "generate_criteo_logs": "",
    "sample": CTR_INPUT, "ctr_features_hashed": CTR_INPUT, "ctr_features_as_is": CTR_INPUT,
    "undersample": CTR_INPUT, "split": CTR_INPUT, "export_parquet": CTR_INPUT, "export_csv": CTR_INPUT,
    "topology_features": PHYSICS_INPUT,
}  # fmt: skip


def stage_specs(files: dict[str, str], rows: int, events: int) -> dict[str, dict[str, Any]]:
    """Every stage of the spec: the two untimed inputs and one stage per kind (named as the kind)."""
    criteo = {"format": "criteo", "path": files.get("logs", ""), "max_rejected_fraction": 0.01}
    read_criteo = {"kind": "read", "params": {**criteo}}  # a copy: no YAML anchor in the spec
    data = {"data": CTR_INPUT}
    return {
        CTR_INPUT: {"kind": "read", "params": criteo},
        PHYSICS_INPUT: {"kind": "generate_physics_events", "params": {"events": events, "seed": SEED}},
        "read_criteo": read_criteo,
        "read_csv": {"kind": "read", "params": {"format": "csv", "path": files.get("csv", ""), "header": True}},
        "read_tsv": {
            "kind": "read",
            "params": {"format": "tsv", "path": files.get("tsv", ""), "header": True, "schema": TEXT_DDL},
        },
        "generate_criteo_logs": {"kind": "generate_criteo_logs", "params": {"rows": rows, "days": 1, "seed": 1}},
        "sample": {"kind": "sample", "inputs": data, "params": {"n": sample_size(rows), "seed": SEED}},
        "ctr_features_hashed": {
            "kind": "ctr_features",
            "inputs": data,
            "params": {"mode": "hashed", "hash_bits": HASH_BITS, "log1p": True},
        },
        "ctr_features_as_is": {"kind": "ctr_features", "inputs": data, "params": {"mode": "as_is"}},
        "undersample": {"kind": "undersample", "inputs": data, "params": {"label_col": "label", "seed": SEED}},
        "split": {
            "kind": "split",
            "inputs": data,
            "params": {"fractions": SPLIT, "seed": SEED, "shuffle": ["train"]},
        },
        "export_parquet": {
            "kind": "export",
            "inputs": data,
            "params": {"format": "parquet", "path": "bench/parquet", "partitions": EXPORT_PARTITIONS},
        },
        "export_csv": {"kind": "export", "inputs": data, "params": {"format": "csv", "path": "bench/csv"}},
        "topology_features": {"kind": "topology_features", "inputs": {"data": PHYSICS_INPUT}},
    }


def spark_jobs(spark: Any, group: str) -> list[tuple[str, float]]:
    """The Spark jobs of a job group, in order: their name (call site) and seconds (from the status store)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = []
    for job_id in sorted(spark.sparkContext.statusTracker().getJobIdsForGroup(group)):
        job = store.job(job_id)
        start, end = job.submissionTime(), job.completionTime()
        done = start.isDefined() and end.isDefined()
        jobs.append((str(job.name()), (end.get().getTime() - start.get().getTime()) / 1000 if done else 0.0))
    return jobs


def measured(spark: Any, group: str, run: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
    """``run()``'s wall, JVM CPU and Python CPU (workers + this driver) seconds, its Spark jobs, its result."""
    spark.sparkContext.setJobGroup(group, group)
    jvm0, py0, t0 = jvm_cpu_seconds(), worker_cpu_seconds() + time.process_time(), time.perf_counter()
    result = run()
    wall, jvm = time.perf_counter() - t0, jvm_cpu_seconds() - jvm0
    py = worker_cpu_seconds() + time.process_time() - py0
    jobs = spark_jobs(spark, group)
    times = {"wall_s": round(wall, 3), "jvm_cpu_s": round(jvm, 2), "py_cpu_s": round(py, 2)}
    return {**times, "jobs_s": round(sum(s for _, s in jobs), 3), "jobs": jobs}, result


def dagspec_counts(spark: Any, stage: Any, manifest: dict[str, Any]) -> Counts:
    """The stage's output counts, under the twins' keys (from the manifest; an export's published folder)."""
    metrics = manifest["metrics"]
    if manifest["kind"] == "generate_criteo_logs":
        with open(f"{stage.output_path('logs')}/day_00.tsv") as lines:
            return {"rows": metrics["rows"], "fields": len(lines.readline().rstrip("\n").split("\t"))}
    if manifest["kind"] == "export":
        rows = metrics["rows"]
        return {"rows": rows if rows is not None else spark.read.csv(metrics["exported_to"], header=True).count()}
    counts: Counts = {"rows" if name == "data" else name: n for name, n in manifest["rows"].items()}
    if "rejected" in metrics:
        counts["rejected"] = metrics["rejected"]
    return counts


def run_dagspec(spark: Any, stage: Any, group: str) -> dict[str, Any]:
    """One forced run of the stage: timings, ``duration_s`` and the output counts."""
    from dagspec.checkpoint import OLD_PREFIX
    from dagspec.job.runtime import run_stage

    times, manifest = measured(spark, group, lambda: run_stage(spark, stage, force=True).manifest)
    for replaced in Path(stage.stage_dir).glob(f"{OLD_PREFIX}*"):  # left for `dagspec gc`: 10^6 rows fill /tmp
        shutil.rmtree(replaced, ignore_errors=True)
    return {"stage_s": manifest["duration_s"], **times, "counts": dagspec_counts(spark, stage, manifest)}


def run_plain(spark: Any, name: str, job: Job, group: str) -> dict[str, Any]:
    """One run of the twin into a fresh folder: timings, then (untimed) its output counts."""
    shutil.rmtree(job.out, ignore_errors=True)
    times, count = measured(spark, group, lambda: TWINS[name](spark, job))
    return {**times, "counts": count()}


def check_counts(name: str, ours: Counts, plain: Counts) -> None:
    """Equal counts; ``split``: the same total, each output within 6 standard deviations."""
    if name == "split":
        total = sum(n or 0 for n in ours.values())
        assert total == sum(n or 0 for n in plain.values()), (name, ours, plain)
        for output, fraction in SPLIT.items():
            spread = 6 * math.sqrt(2 * total * fraction * (1 - fraction))
            assert abs((ours[output] or 0) - (plain[output] or 0)) <= spread, (name, ours, plain)
        return
    assert ours.keys() == plain.keys(), (name, ours, plain)
    for key, n in ours.items():
        if plain[key] is None:  # read_csv's twin cannot count rejected lines: the clean file has none
            assert key == "rejected" and n == 0, (name, ours, plain)
        else:
            assert n == plain[key], f"{name}: {key} dagspec {n}, plain {plain[key]} ({ours} / {plain})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=10_000, help="physics events (topology_features)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (counts still checked)")
    parser.add_argument("--kinds", nargs="+", choices=list(TWINS), default=list(TWINS), metavar="KIND")
    parser.add_argument("--work", default="/tmp/dagspec-bench-kinds", help="scratch folder (inputs are kept)")
    parser.add_argument("--out", default=None, help="JSON results")
    args = parser.parse_args()
    kinds = [k for k in TWINS if k in args.kinds]
    work = Path(args.work)
    spark = stage_session(work)
    from dagspec.job.runtime import run_stage
    from dagspec.plan.resolve import default_context, resolve_pipeline
    from dagspec.spec.loader import load_spec

    sources = {SOURCES[k] for k in kinds}
    files: dict[str, str] = {}
    if sources - {"", PHYSICS_INPUT}:
        logs = make_logs(spark, work, args.rows)
        files["logs"] = str(logs)
        if sources & {"csv", "tsv"}:
            files.update({fmt: str(path) for fmt, path in make_text_tables(spark, logs, work).items()})
    upstream = [s for s in (CTR_INPUT, PHYSICS_INPUT) if s in sources]
    every = stage_specs(files, args.rows, args.events)
    spec_path = work / "pipelines" / "data_kinds.yaml"
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(yaml.safe_dump({"stages": {s: every[s] for s in [*upstream, *kinds]}}, sort_keys=False))
    spec = load_spec(spec_path)
    plan = resolve_pipeline(spec, default_context(spec, {}))
    for name in upstream:  # untimed; a hit when an earlier invocation committed it
        t0 = time.perf_counter()
        outcome = run_stage(spark, plan[name]).outcome
        print(f"input {name}: {outcome} in {time.perf_counter() - t0:.1f} s", flush=True)
    plan = resolve_pipeline(spec, default_context(spec, {}))  # planned again: the inputs are committed now
    paths = {**files, **{s: plan[s].output_path("data") for s in upstream}}

    runs: list[dict[str, Any]] = []
    for rep in range(-args.warmup, args.repeat):  # negative: a warm-up round, left out of the medians
        for name in kinds:
            job = Job(source=paths.get(SOURCES[name], ""), out=work / "plain" / name, rows=args.rows)
            counts: dict[str, Counts] = {}
            for side in ("dagspec", "plain") if rep % 2 == 0 else ("plain", "dagspec"):
                load = os.getloadavg()[0]
                group = f"{name}-{rep}-{side}"
                result = (
                    run_dagspec(spark, plan[name], group) if side == "dagspec" else run_plain(spark, name, job, group)
                )
                counts[side] = result["counts"]
                run = {"kind": name, "rep": rep, "side": side, "load1": round(load, 2), **result}
                print(json.dumps({k: v for k, v in run.items() if k != "jobs"}), flush=True)
                runs.append(run)
            check_counts(name, counts["dagspec"], counts["plain"])
    spark.stop()
    summary = summarise([r for r in runs if r["rep"] >= 0], kinds)
    print(
        f"\n{args.rows:,} rows, {args.events:,} events; medians of {args.repeat} rounds after {args.warmup} warm-up\n"
    )
    print(table(summary))
    if args.out:
        Path(args.out).write_text(
            json.dumps({"rows": args.rows, "events": args.events, "runs": runs, "summary": summary}, indent=2)
        )
    return 0


def summarise(runs: list[dict[str, Any]], kinds: list[str]) -> dict[str, dict[str, Any]]:
    """Per kind: each side's medians, the dagspec / plain ratios of the medians, the last counts."""
    summary = {}
    for name in kinds:
        side = {s: [r for r in runs if r["kind"] == name and r["side"] == s] for s in ("dagspec", "plain")}
        row: dict[str, Any] = {
            f"{s}_{key}": statistics.median(r[key] for r in side[s])
            for s in ("dagspec", "plain")
            for key in ("wall_s", "jvm_cpu_s", "py_cpu_s", "jobs_s")
        }
        row["dagspec_stage_s"] = statistics.median(r["stage_s"] for r in side["dagspec"])
        for key in ("stage_s", "wall_s"):
            row[f"ratio_{key}"] = row[f"dagspec_{key}"] / max(row["plain_wall_s"], 1e-9)
        row["ratio_jvm_cpu_s"] = row["dagspec_jvm_cpu_s"] / max(row["plain_jvm_cpu_s"], 1e-9)
        cpu = {s: row[f"{s}_jvm_cpu_s"] + row[f"{s}_py_cpu_s"] for s in ("dagspec", "plain")}
        row["ratio_all_cpu_s"] = cpu["dagspec"] / max(cpu["plain"], 1e-9)
        for s in ("dagspec", "plain"):
            row[f"{s}_jobs"] = statistics.median(len(r["jobs"]) for r in side[s])
            row[f"{s}_counts"] = side[s][-1]["counts"]
        summary[name] = row
    return summary


def _counts(counts: Counts) -> str:
    return ", ".join(
        f"{n:,}" if key == "rows" else f"{key} {n if n is None else f'{n:,}'}" for key, n in counts.items()
    )


def table(summary: dict[str, dict[str, Any]]) -> str:
    """A Markdown table: per kind, both sides' medians, the ratios and the output counts."""
    lines = [
        "| kind | dagspec stage s | dagspec wall s | dagspec JVM CPU s | plain wall s | plain JVM CPU s "
        "| JVM CPU ratio | wall ratio | Python CPU s dagspec / plain | all CPU ratio | rows dagspec | rows plain |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, r in summary.items():
        lines.append(
            f"| {name} | {r['dagspec_stage_s']:.2f} | {r['dagspec_wall_s']:.2f} | {r['dagspec_jvm_cpu_s']:.1f} "
            f"| {r['plain_wall_s']:.2f} | {r['plain_jvm_cpu_s']:.1f} | {r['ratio_jvm_cpu_s']:.2f}x "
            f"| {r['ratio_wall_s']:.2f}x | {r['dagspec_py_cpu_s']:.1f} / {r['plain_py_cpu_s']:.1f} "
            f"| {r['ratio_all_cpu_s']:.2f}x | {_counts(r['dagspec_counts'])} | {_counts(r['plain_counts'])} |"
        )
    lines += [
        "\nWhere the wall goes: Spark jobs (count, seconds in them) and the rest (planning, listing, driver "
        "work, commit)\n",
        "| kind | dagspec jobs | dagspec s in jobs | dagspec s outside | plain jobs | plain s in jobs | plain s outside |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in summary.items():
        outside = {s: r[f"{s}_wall_s"] - r[f"{s}_jobs_s"] for s in ("dagspec", "plain")}
        lines.append(
            f"| {name} | {r['dagspec_jobs']:.0f} | {r['dagspec_jobs_s']:.2f} | {outside['dagspec']:.2f} "
            f"| {r['plain_jobs']:.0f} | {r['plain_jobs_s']:.2f} | {outside['plain']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
