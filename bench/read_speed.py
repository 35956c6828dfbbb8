"""Reading raw Criteo logs: dagspec's ``read`` (format criteo) against Spark's own CSV reader.

One ``local[2]`` session, one generated day file of ``--rows`` Criteo lines (``generate_criteo_logs``'s
code, seed 1; kept in ``--work`` and reused). Interleaved ``--repeat`` times:

- **dagspec**: a ``read`` stage (``format: criteo``) through ``run_stage`` (``--force``), the code
  path of every stage: the kind writes ``data`` as Parquet, the quarantine and the manifest. Timed:
  the stage's own ``duration_s`` (its manifest) and the wall around ``run_stage``;
- **plain**: ``spark.read.csv`` with the same 40 columns (label int, I bigint, C string), tab
  separator, ``mode=PERMISSIVE`` and a corrupt-record column, written as Parquet.

Both sides also get the CPU seconds of the Spark JVM (``/proc``: the session's java child) and the
1-minute load average: on a shared machine CPU seconds stay comparable when wall times do not.
Before timing, both read a copy of the first ``--check-rows`` lines with ``--bad`` bad lines
mixed in (a field short, a word in an I-column, a field too many: lines both reject) and must
agree on the good and the rejected rows.

Usage: ``.venv/bin/python bench/read_speed.py [--rows 1000000] [--repeat 3] [--work DIR]``
(``PYTHONPATH=<other checkout>/src`` measures another version of the kind).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from local_spark import stage_session

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

SPEC = """
stages:
  raw: {{kind: read, params: {{format: criteo, path: "{path}", max_rejected_fraction: 0.01}}}}
"""


def jvm_cpu_seconds() -> float:
    """User + system CPU seconds of this process's child processes (the Spark JVM)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def make_logs(spark: Any, work: Path, rows: int) -> Path:
    """The generated day file (reused when it is there)."""
    from dagspec.kinds.ctr.logs_generator import write_criteo_logs

    logs = work / f"logs_{rows}"
    if not (logs / "day_00.tsv").exists():
        write_criteo_logs(spark, str(logs), rows=rows, days=1, seed=1, partitions_per_day=1)
    return logs / "day_00.tsv"


def make_bad_file(source: Path, target: Path, rows: int, bad: int) -> list[str]:
    """The first ``rows`` lines of ``source`` with ``bad`` lines every ``rows // bad`` replaced; returns them."""
    with source.open() as lines:
        head = [next(lines).rstrip("\n") for _ in range(rows)]
    injected = []
    for k in range(bad):
        i = (k + 1) * (rows // (bad + 1))
        fields = head[i].split("\t")
        kind = k % 3
        if kind == 0:
            fields = fields[:39]  # a field short
        elif kind == 1:
            fields[3] = "three"  # a word in I3
        else:
            fields.append("extra")  # a field too many
        head[i] = "\t".join(fields)
        injected.append(head[i])
    target.write_text("\n".join(head) + "\n")
    return injected


def run_dagspec(spark: Any, work: Path, data: Path, name: str) -> dict[str, Any]:
    """One forced run of the read stage on ``data``; its manifest and timings."""
    from dagspec.job.runtime import run_stage
    from dagspec.plan.resolve import default_context, resolve_pipeline
    from dagspec.spec.loader import load_spec

    spec_path = work / "pipelines" / f"{name}.yaml"
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(SPEC.format(path=data))
    spec = load_spec(spec_path)
    stage = resolve_pipeline(spec, default_context(spec, {}))["raw"]
    cpu0, t0 = jvm_cpu_seconds(), time.perf_counter()
    manifest = run_stage(spark, stage, force=True).manifest
    wall, cpu = time.perf_counter() - t0, jvm_cpu_seconds() - cpu0
    return {
        "stage_s": manifest["duration_s"],
        "wall_s": round(wall, 3),
        "jvm_cpu_s": round(cpu, 2),
        "good": manifest["rows"]["data"],
        "rejected": manifest["metrics"]["rejected"],
        "data": stage.output_path("data"),
    }


def run_plain(spark: Any, data: Path, out: Path) -> dict[str, Any]:
    """Spark's CSV reader, same schema, PERMISSIVE with a corrupt-record column, written as Parquet."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DataType, StringType, StructField, StructType

    from dagspec.kinds.ctr.columns import criteo_ddl

    schema = DataType.fromDDL(criteo_ddl())
    assert isinstance(schema, StructType)
    full = StructType([*schema.fields, StructField("_corrupt", StringType())])
    shutil.rmtree(out, ignore_errors=True)
    cpu0, t0 = jvm_cpu_seconds(), time.perf_counter()
    reader = spark.read.csv(str(data), schema=full, sep="\t", mode="PERMISSIVE", columnNameOfCorruptRecord="_corrupt")
    reader.write.parquet(str(out))
    wall, cpu = time.perf_counter() - t0, jvm_cpu_seconds() - cpu0
    written = spark.read.parquet(str(out))
    counts = written.agg(F.count(F.lit(1)).alias("n"), F.count("_corrupt").alias("bad")).first()
    assert counts is not None
    return {
        "wall_s": round(wall, 3),
        "jvm_cpu_s": round(cpu, 2),
        "good": counts["n"] - counts["bad"],
        "rejected": counts["bad"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check-rows", type=int, default=100_000, help="lines of the file with bad lines")
    parser.add_argument("--bad", type=int, default=30, help="bad lines mixed into that file")
    parser.add_argument("--work", default="/tmp/dagspec-bench-read", help="scratch folder (the logs are kept)")
    parser.add_argument("--out", default=None, help="JSON results")
    args = parser.parse_args()
    work = Path(args.work)
    spark = stage_session(work)
    logs = make_logs(spark, work, args.rows)

    checked = work / "bad.tsv"
    injected = make_bad_file(logs, checked, args.check_rows, args.bad)
    ours, plain = run_dagspec(spark, work, checked, "check"), run_plain(spark, checked, work / "plain_check")
    print(
        f"bad-lines file: dagspec {ours['good']} good, {ours['rejected']} rejected; "
        f"plain {plain['good']} good, {plain['rejected']} rejected",
        flush=True,
    )
    assert ours["rejected"] == plain["rejected"] == len(injected), (ours, plain, len(injected))
    assert ours["good"] == plain["good"] == args.check_rows - len(injected), (ours, plain)
    ours_rows = spark.read.parquet(ours["data"]).exceptAll(
        spark.read.parquet(str(work / "plain_check")).where("_corrupt IS NULL").drop("_corrupt")
    )
    assert ours_rows.isEmpty(), "dagspec and plain read different rows"

    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for side in ("dagspec", "plain"):
            load = os.getloadavg()[0]
            if side == "dagspec":
                result = run_dagspec(spark, work, logs, "full")
                result.pop("data")
            else:
                result = run_plain(spark, logs, work / "plain_out")
            run = {"rep": rep, "side": side, "load1": round(load, 2), **result}
            print(json.dumps(run), flush=True)
            runs.append(run)
    spark.stop()
    summary = summarise(runs)
    print(table(runs, summary))
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": args.rows, "runs": runs, "summary": summary}, indent=2))
    return 0


def summarise(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians per side, and the dagspec / plain ratios of the medians."""
    med = {
        f"{side}_{key}": statistics.median(r[key] for r in runs if r["side"] == side)
        for side in ("dagspec", "plain")
        for key in ("wall_s", "jvm_cpu_s")
    }
    med["dagspec_stage_s"] = statistics.median(r["stage_s"] for r in runs if r["side"] == "dagspec")
    med["ratio_stage_s"] = med["dagspec_stage_s"] / med["plain_wall_s"]
    med["ratio_wall_s"] = med["dagspec_wall_s"] / med["plain_wall_s"]
    med["ratio_jvm_cpu_s"] = med["dagspec_jvm_cpu_s"] / med["plain_jvm_cpu_s"]
    return med


def table(runs: list[dict[str, Any]], summary: dict[str, float]) -> str:
    """A Markdown table of every run, then the medians and the ratios."""
    lines = ["| round | side | stage s | wall s | JVM CPU s | load (1 min) |", "|---:|---|---:|---:|---:|---:|"]
    for r in runs:
        stage = f"{r['stage_s']:.1f}" if "stage_s" in r else ""
        lines.append(
            f"| {r['rep']} | {r['side']} | {stage} | {r['wall_s']:.1f} | {r['jvm_cpu_s']:.1f} | {r['load1']} |"
        )
    lines.append(
        f"\nmedians: dagspec stage {summary['dagspec_stage_s']:.1f} s, wall {summary['dagspec_wall_s']:.1f} s, "
        f"JVM CPU {summary['dagspec_jvm_cpu_s']:.1f} s; plain wall {summary['plain_wall_s']:.1f} s, "
        f"JVM CPU {summary['plain_jvm_cpu_s']:.1f} s\n"
        f"ratio dagspec / plain: stage {summary['ratio_stage_s']:.2f}x, wall {summary['ratio_wall_s']:.2f}x, "
        f"JVM CPU {summary['ratio_jvm_cpu_s']:.2f}x"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
