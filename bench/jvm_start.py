"""Spark JVM start-up: a one-job spark-submit with and without the class archive (``dagspec.jvm``).

    .venv/bin/python bench/jvm_start.py --repeat 5

The job creates a session, counts ``range(10)`` and stops: nearly all of its time is the JVM
starting, loading Spark's classes and compiling them. Variants, interleaved round by round:

- ``plain``: what a JVM gets without dagspec's help (the baseline);
- ``archive``: ``JDK_JAVA_OPTIONS`` from ``dagspec.jvm`` (built by ``dagspec jvm-archive``);
- ``archive + C1``: the archive and ``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC``, what the test
  suite gives its short-lived JVMs (tests/conftest.py).

Wall time of the whole command and its CPU time (user + system of the process tree); medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dagspec import jvm

BIN = Path(sys.executable).parent
JOB = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(10).count()
spark.stop()
"""
C1 = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def run_once(job: Path, options: str) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k != jvm.JAVA_OPTIONS_VAR}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", PATH=f"{BIN}:{env.get('PATH', '')}")
    if options:
        env[jvm.JAVA_OPTIONS_VAR] = options
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    argv = [str(BIN / "spark-submit"), "--master", "local[*]", "--conf", "spark.ui.enabled=false", str(job)]
    subprocess.run(argv, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not jvm.archive_path().is_file():
        raise SystemExit(f"no archive at {jvm.archive_path()}: run `dagspec jvm-archive` first")
    archive = jvm.java_options({})
    variants = {"plain": "", "archive": archive, "archive + C1": jvm.java_options({jvm.JAVA_OPTIONS_VAR: C1})}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as folder:
        job = Path(folder) / "job.py"
        job.write_text(JOB)
        run_once(job, "")  # warm the page cache for every variant alike
        for _ in range(args.repeat):
            for name, options in variants.items():
                results[name].append(run_once(job, options))
    base_wall = statistics.median(w for w, _ in results["plain"])
    base_cpu = statistics.median(c for _, c in results["plain"])
    print("| variant | median wall s | min-max wall s | median CPU s | runs | wall ratio | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        walls = [w for w, _ in runs]
        wall, cpu = statistics.median(walls), statistics.median(c for _, c in runs)
        print(
            f"| {name} | {wall:.1f} | {min(walls):.1f}-{max(walls):.1f} | {cpu:.1f} | {len(runs)} "
            f"| {wall / base_wall:.2f}x | {cpu / base_cpu:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
