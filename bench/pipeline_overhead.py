"""Pipeline overhead: a dagspec pipeline against the same work hand-written in one PySpark process.

    .venv/bin/python bench/pipeline_overhead.py --rows 20000 2000000 --repeat 3 [--modes connect]

The pipeline (the issue's): read a Criteo TSV -> undersample -> 80/20 split -> export train and
test as Parquet; 5 stages. Run side by side, interleaved round by round, in one invocation:

- ``dagspec connect``: ``dagspec run --force`` in Connect mode (the default): every stage a client
  of the long-lived local Spark Connect server (started before timing, as a user's would be);
- ``dagspec connect-cold``: the same, with the server stopped before each run (untimed): the run
  starts it, and its Python workers, itself (the first run after a fresh start);
- ``dagspec spark``: ``dagspec run --force --mode spark``: a spark-submit (a JVM) per stage;
- ``script``: one ``python`` process doing the same work with a local[*] SparkSession: parse with
  the Criteo schema and keep bad rows aside, exact undersampling to the minority class
  (seeded ranks), a seeded 80/20 split, two Parquet writes.

Every JVM, the script's too, gets the class archive of ``dagspec jvm-archive`` when it is built,
so the ratios compare dagspec's work with the script's, not JVM flags. Each variant's whole
command is timed (wall). The no-op section runs a pipeline of five independent ``sql: SELECT n``
stages with ``--force`` in both modes and reports the task durations Airflow records: the first
task of a run also pays ``airflow dags test``'s one-time start of its in-process execution API
(2.5-4 s, once per command whatever the number of stages), so the fixed cost of a stage is the
median over the other four, and the first is reported beside it. The input is the shared
1,000-line Criteo sample repeated to ``--rows`` lines. Medians over ``--repeat`` rounds; ratios are against the script.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dagspec import jvm

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "data" / "criteo" / "criteo_1tb_sample_1000.tsv"
DAGSPEC = str(Path(sys.executable).parent / "dagspec")

PIPELINE = """\
dag_id: bench_overhead
schedule: null
start_date: 2026-01-01
params:
  input: {{type: string, default: {input}}}
spark:
  conf: {{spark.sql.shuffle.partitions: 4}}
stages:
  raw: {{kind: read, params: {{format: tsv, path: "{{{{ params.input }}}}", schema: criteo}}}}
  balanced: {{kind: undersample, inputs: {{data: raw}}, params: {{label_col: label, seed: 42}}}}
  split:
    kind: split
    inputs: {{data: balanced}}
    params: {{fractions: {{train: 0.8, test: 0.2}}, seed: 42, shuffle: [train]}}
  train_out: {{kind: export, inputs: {{data: split.train}}, params: {{path: bench/overhead/train}}}}
  test_out: {{kind: export, inputs: {{data: split.test}}, params: {{path: bench/overhead/test}}}}
"""

NOOP_STAGES = 5
NOOP = """\
dag_id: bench_noop_stages
schedule: null
start_date: 2026-01-01
spark:
  conf: {spark.sql.shuffle.partitions: 1}
stages:
""" + "".join(f"  noop{i}: {{kind: sql, params: {{query: SELECT {i} AS x}}}}\n" for i in range(1, NOOP_STAGES + 1))

SCRIPT = r"""
import sys, time
from pyspark.sql import SparkSession, functions as F, types as T, Window
src, out = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[*]").config("spark.sql.shuffle.partitions", "4")
         .config("spark.ui.enabled", "false").getOrCreate())
fields = [T.StructField("label", T.IntegerType())]
fields += [T.StructField(f"I{i}", T.IntegerType()) for i in range(1, 14)]
fields += [T.StructField(f"C{i}", T.StringType()) for i in range(1, 27)]
fields += [T.StructField("_bad", T.StringType())]
raw = (spark.read.schema(T.StructType(fields)).option("sep", "\t").option("mode", "PERMISSIVE")
       .option("columnNameOfCorruptRecord", "_bad").csv(src).cache())
raw.where(F.col("_bad").isNotNull()).write.mode("overwrite").parquet(out + "/rejected")
good = raw.where(F.col("_bad").isNull() & F.col("label").isNotNull()).drop("_bad")
counts = {r["label"]: r["count"] for r in good.groupBy("label").count().collect()}
quota = min(counts.values())
ranked = good.withColumn("_r", F.row_number().over(Window.partitionBy("label").orderBy(F.rand(42))))
balanced = ranked.where(F.col("_r") <= quota).drop("_r")
train, test = balanced.randomSplit([0.8, 0.2], seed=42)
train.orderBy(F.rand(42)).write.mode("overwrite").parquet(out + "/train")
test.write.mode("overwrite").parquet(out + "/test")
spark.stop()
"""


def input_file(rows: int, folder: Path) -> Path:
    """The shared sample repeated to ``rows`` lines (written once per size)."""
    path = folder / f"criteo_{rows}.tsv"
    if not path.exists():
        lines = SAMPLE.read_text().splitlines(keepends=True)
        with path.open("w") as out:
            for i in range(rows):
                out.write(lines[i % len(lines)])
    return path


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, done.stdout


def task_seconds(stdout: str) -> list[float]:
    """The no-op tasks' durations in the order Airflow ran them (read from the run's log)."""
    durations = dict(re.findall(r"^\s+(noop\d+)\s+(?:success|ran)\s+([0-9.]+) s", stdout, re.MULTILINE))
    log = re.search(r"log: (\S+\.log)", stdout)
    if len(durations) != NOOP_STAGES or not log:
        raise SystemExit(f"expected {NOOP_STAGES} no-op task durations and a log in:\n{stdout}")
    text = (REPO / log.group(1)).read_text()  # an absolute log path replaces REPO
    ran = re.findall(r"\[DAG TEST\] running task <TaskInstance: bench_noop_stages\.(noop\d+) ", text)
    return [float(durations[task]) for task in ran]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, nargs="*", default=[20_000, 2_000_000], help="input sizes; none: only the no-op section"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=["connect", "connect-cold", "spark"],
        default=["connect", "spark"],
        help="dagspec's modes to time (connect-cold: the Connect server stopped before each run, untimed)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dagspec-bench-overhead-"))
    specs = work / "pipelines"
    specs.mkdir()
    env = {**os.environ, "DAGSPEC_STORAGE_ROOT": str(work / "storage"), "PYSPARK_PYTHON": sys.executable}
    env.update(jvm.jvm_env())  # the script's JVM starts from the same class archive as dagspec's (when built)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    noop = specs / "bench_noop_stages.yaml"
    noop.write_text(NOOP)
    subprocess.run([DAGSPEC, "connect", "up"], env=env, check=True, cwd=REPO)  # long-lived: not timed
    results: dict[tuple[str, str], list[float]] = {}
    for rows in args.rows:
        data = input_file(rows, work)
        spec = specs / f"bench_overhead_{rows}.yaml"
        spec.write_text(PIPELINE.format(input=data).replace("bench_overhead", f"bench_overhead_{rows}", 1))
        variants = {
            f"dagspec {mode}": [DAGSPEC, "run", str(spec), "--force", "--mode", mode.removesuffix("-cold")]
            for mode in args.modes
        }
        variants["script"] = [sys.executable, "-c", SCRIPT, str(data), str(work / f"script_{rows}")]
        for _ in range(args.repeat):
            for name, argv in variants.items():
                if name.endswith("-cold"):  # the run starts the server (and its Python workers) itself
                    subprocess.run([DAGSPEC, "connect", "down"], env=env, check=True, cwd=REPO, capture_output=True)
                elif name.startswith("dagspec connect"):
                    subprocess.run([DAGSPEC, "connect", "up"], env=env, check=True, cwd=REPO, capture_output=True)
                wall, _ = timed(argv, env)
                results.setdefault((f"{rows:,} rows", name), []).append(wall)
                print(f"{rows:>9,} rows  {name:16} {wall:7.1f} s", flush=True)
    for _ in range(args.repeat):
        for mode in (m for m in args.modes if not m.endswith("-cold")):
            _, out = timed([DAGSPEC, "run", str(noop), "--force", "--mode", mode], env)
            first, *others = task_seconds(out)
            results.setdefault(("no-op stage", f"task duration, {mode}"), []).extend(others)
            results.setdefault(("no-op stage", f"first task of a run, {mode}"), []).append(first)
    print("\n| input | variant | median s | min-max s | runs | ratio to script |")
    print("|---|---|---:|---:|---:|---:|")
    for (what, name), values in results.items():
        median = statistics.median(values)
        script = results.get((what, "script"))
        ratio = f"{median / statistics.median(script):.2f}x" if script else ""
        print(f"| {what} | {name} | {median:.1f} | {min(values):.1f}-{max(values):.1f} | {len(values)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
