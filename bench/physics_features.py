"""Benchmark of ``topology_features``: the seed's Python UDF vs dagspec vs the I/O floor.

Every variant runs in ONE Spark session on the same Parquet data and ends with a Parquet write
(the seed's action); runs are taken round-robin across the variants:

- ``seed``: a faithful port of the SparkDLTrigger feature preparation: Spark ML MinMaxScaler on the
  HLF vector, OneHotEncoder(dropLast=False) on the label, and the row-at-a-time Python UDF
  (sort by DeltaR, reverse=True, then sklearn StandardScaler) with ``useArrow=False`` (Spark 4.2.0's
  Arrow-optimized UDFs hang on Parquet scans, SPARK-58241);
- ``dagspec``: ``add_topology_features`` (one min/max aggregation + mapInArrow with numpy);
- ``floor``: the same read and write with no transform;
- ``output_floor``: the read and a write of dagspec's output size, with no Python: the three new
  columns are JVM copies of input columns (dagspec writes a second particle column as large as
  the first, which the plain floor never writes).

Usage: ``.venv/bin/python bench/physics_features.py --events 20000 --runs 3 --scale 1 2 4``
Prints one JSON line per measurement and a markdown summary (events/s, ratios to the floor).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dagspec.kinds.physics.generate_events import generate_physics_dataframe
from dagspec.kinds.physics.generator import GeneratorConfig
from dagspec.kinds.physics.topology_features import TopologyFeaturesParams, add_topology_features


def seed_transform(particles: list[list[float]]) -> list[list[float]]:
    """The seed's UDF body (SparkDLTrigger feature preparation)."""
    from sklearn.preprocessing import StandardScaler

    def delta_phi(phi1: float, phi2: float) -> float:
        dphi = phi1 - phi2
        while dphi > math.pi:
            dphi -= 2 * math.pi
        while dphi < -math.pi:
            dphi += 2 * math.pi
        return dphi

    lepton = particles[0]
    particles.sort(
        key=lambda p: math.sqrt((p[5] - lepton[5]) ** 2 + delta_phi(p[6], lepton[6]) ** 2),
        reverse=True,
    )
    return StandardScaler().fit_transform(particles).tolist()


def seed_variant(df: DataFrame) -> DataFrame:
    """The seed's pipeline: MinMaxScaler, OneHotEncoder(dropLast=False), the Python UDF."""
    from pyspark.ml.feature import MinMaxScaler, OneHotEncoder
    from pyspark.ml.functions import array_to_vector

    udf = F.udf(seed_transform, T.ArrayType(T.ArrayType(T.DoubleType())), useArrow=False)
    df = df.withColumn("hfeatures_vec", array_to_vector("hfeatures"))
    df = MinMaxScaler(inputCol="hfeatures_vec", outputCol="HLF_input").fit(df).transform(df)
    df = OneHotEncoder(inputCol="label", outputCol="encoded_label", dropLast=False).fit(df).transform(df)
    return df.withColumn("GRU_input", udf("lfeatures")).drop("hfeatures_vec")


def output_floor(df: DataFrame) -> DataFrame:
    """dagspec's output columns as JVM copies: the cost of writing that many bytes, no transform."""
    label = F.col("label").cast("double")
    return df.select("*", F.col("hfeatures").alias("HLF_input"), F.array(label, label, label).alias("encoded_label"),
                     F.col("lfeatures").alias("GRU_input"))  # fmt: skip


VARIANTS: dict[str, Callable[[DataFrame], DataFrame]] = {
    "floor": lambda df: df,
    "output_floor": output_floor,
    "dagspec": lambda df: add_topology_features(df, TopologyFeaturesParams()),
    "seed": seed_variant,
}


def timed_run(spark: SparkSession, variant: str, data: str, work: Path) -> float:
    """Seconds for read -> transform -> Parquet write (the output is deleted afterwards)."""
    out = work / f"out-{variant}-{time.monotonic_ns()}"
    start = time.perf_counter()
    VARIANTS[variant](spark.read.parquet(data)).write.parquet(str(out))
    elapsed = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return elapsed


def make_data(spark: SparkSession, events: int, path: Path, max_particles: int) -> dict[str, float]:
    """Generated events (10..max_particles particles) written once as Parquet; returns their shape."""
    generate_physics_dataframe(spark, events, GeneratorConfig(seed=7, max_particles=max_particles)).write.parquet(
        str(path)
    )
    row = (
        spark.read.parquet(str(path))
        .agg(F.min(F.size("lfeatures")), F.avg(F.size("lfeatures")), F.max(F.size("lfeatures")))
        .first()
    )
    assert row is not None
    size_mb = sum(f.stat().st_size for f in path.rglob("*.parquet")) / 2**20
    return {
        "min_particles": row[0],
        "mean_particles": round(row[1], 1),
        "max_particles": row[2],
        "mb": round(size_mb, 1),
    }


def replicate(data: Path, times: int, target: Path) -> Path:
    """A Parquet directory holding every part file of ``data`` ``times`` times (hard links)."""
    target.mkdir()
    for part in sorted(data.glob("*.parquet")):
        for i in range(times):
            os.link(part, target / f"copy{i}-{part.name}")
    return target


def main() -> int:
    """Run the benchmark and print JSON lines plus a markdown summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--scale", type=int, nargs="*", default=[1, 2, 4], help="multiples of --events (dagspec, floor)"
    )
    parser.add_argument("--max-particles", type=int, default=150)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("bench-physics-features")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-physics-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        json.dumps(
            {
                "machine": platform.node(),
                "cpus": os.cpu_count(),
                "load_avg_1m": os.getloadavg()[0],
                "spark": spark.version,
                "master": args.master,
                "python": platform.python_version(),
            }
        ),
        flush=True,
    )
    results: dict[tuple[str, int], float] = {}
    try:
        base_data = work / f"events-{args.events}"
        shape = make_data(spark, args.events, base_data, args.max_particles)
        print(json.dumps({"data": str(base_data), "events": args.events, **shape}), flush=True)
        timed_run(spark, "floor", str(base_data), work)  # warm-up: JVM, Python workers, page cache
        for multiple in sorted(set([1, *args.scale])):
            events = args.events * multiple
            # k x the events = the generated files k times (hard links): the same bytes to read and
            # transform per event, without generating (and waiting for) more data
            data = base_data if multiple == 1 else replicate(base_data, multiple, work / f"events-{events}")
            variants = ["floor", "output_floor", "dagspec", "seed"] if multiple == 1 else ["floor", "dagspec"]
            # round-robin: a drift in the machine's speed hits every variant alike
            runs: dict[str, list[float]] = {variant: [] for variant in variants}
            for _ in range(args.runs):
                for variant in variants:
                    runs[variant].append(timed_run(spark, variant, str(data), work))
            for variant, times in runs.items():
                results[(variant, events)] = statistics.median(times)
                line = {"variant": variant, "events": events, "times_s": [round(t, 2) for t in times]}
                line |= {"median_s": round(results[(variant, events)], 2)}
                line |= {"events_per_s": round(events / results[(variant, events)])}
                print(json.dumps(line), flush=True)
    finally:
        spark.stop()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    base = args.events
    floor, ours, seed = results[("floor", base)], results[("dagspec", base)], results[("seed", base)]
    out_floor = results[("output_floor", base)]
    print("\n| variant | median s | events/s | x floor | x output floor |\n|---|---|---|---|---|")
    rows = (
        ("floor (read+write)", floor),
        ("output floor (read+write of dagspec's output size)", out_floor),
        ("dagspec (mapInArrow+numpy)", ours),
        ("seed UDF", seed),
    )
    for name, value in rows:
        print(f"| {name} | {value:.2f} | {base / value:,.0f} | {value / floor:.2f} | {value / out_floor:.2f} |")
    print(
        f"\ndagspec / floor = {ours / floor:.2f}; dagspec / output floor = {ours / out_floor:.2f};"
        f" seed / dagspec = {seed / ours:.2f}; seed / floor = {seed / floor:.2f}"
    )
    print("\n| events | floor s | dagspec s | dagspec s per 10k events |\n|---|---|---|---|")
    for multiple in sorted(set([1, *args.scale])):
        events = base * multiple
        f, d = results[("floor", events)], results[("dagspec", events)]
        print(f"| {events:,} | {f:.2f} | {d:.2f} | {d / events * 1e4:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
