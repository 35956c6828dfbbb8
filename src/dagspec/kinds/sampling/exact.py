"""Exact-size random selection over Spark, without collecting rows (shared by undersample and sample)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dagspec.errors import StageFailedError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def take_exact(df: DataFrame, quotas: Mapping[str, int], seed: int, class_col: str | None = None) -> DataFrame:
    """Exactly ``quotas[c]`` rows of each class ``c`` (or of the whole table under key ''), at random.

    Rows get a seeded random rank; the table is range-partitioned and sorted by (class, rank), so
    each partition holds a contiguous slice of every class's order. A tiny per-partition count
    table then gives each partition's offset, and a row is kept when offset + its position within
    the partition is below the quota. Exact, fully parallel, and nothing but counts reach the driver.
    """
    from pyspark.sql import functions as F

    key = F.col(class_col).cast("string") if class_col else F.lit("")
    ranked = df.withColumn("__class", key).withColumn("__rank", F.rand(seed))
    n_partitions = max(1, ranked.rdd.getNumPartitions())
    ranked = (
        ranked.repartitionByRange(n_partitions, "__class", "__rank")
        .sortWithinPartitions("__class", "__rank")
        .withColumn("__pid", F.spark_partition_id())
        .withColumn("__mid", F.monotonically_increasing_id())
    )
    ranked = ranked.persist()
    counts = ranked.groupBy("__pid", "__class").agg(F.count("*").alias("n"), F.min("__mid").alias("first")).collect()
    offsets: dict[tuple[int, str], int] = {}
    running: dict[str, int] = {}
    for row in sorted(counts, key=lambda r: (r["__class"], r["__pid"])):
        offsets[(row["__pid"], row["__class"])] = running.get(row["__class"], 0) - row["first"]
        running[row["__class"]] = running.get(row["__class"], 0) + row["n"]
    missing = {c: (q, running.get(c, 0)) for c, q in quotas.items() if running.get(c, 0) < q}
    if missing:
        detail = ", ".join(f"{c or 'all rows'}: asked {q}, have {have}" for c, (q, have) in missing.items())
        ranked.unpersist()
        raise StageFailedError(f"not enough rows to sample exactly: {detail}")
    offset_map = F.create_map(
        *[e for (pid, c), off in offsets.items() for e in (F.lit(f"{pid}|{c}"), F.lit(off).cast("long"))]
    )
    quota_map = F.create_map(*[e for c, q in quotas.items() for e in (F.lit(c), F.lit(q).cast("long"))])
    position = F.col("__mid") + offset_map[F.concat_ws("|", F.col("__pid").cast("string"), F.col("__class"))]
    kept = ranked.where(position < F.coalesce(quota_map[F.col("__class")], F.lit(0)))
    return kept.drop("__class", "__rank", "__pid", "__mid")
