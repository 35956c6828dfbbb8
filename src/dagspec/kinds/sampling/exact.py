"""Exact-size random selection over Spark, without collecting rows (shared by undersample and sample)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from dagspec.errors import StageFailedError
from dagspec.kinds.base import num_partitions
from dagspec.kinds.sampling.row_hash import row_hash

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def take_exact(
    df: DataFrame,
    quotas: Mapping[str, int],
    seed: int,
    salt: str,
    class_col: str | None = None,
    key: Sequence[str] | None = None,
) -> DataFrame:
    """Exactly ``quotas[c]`` rows of each class ``c`` (or of the whole table under key ''), at random.

    Every row's rank is a seeded hash of its values (``row_hash``: the same rows whatever the
    partitioning; ties, i.e. identical rows, broken by a row id). Only the narrow table of
    (class, rank, id) is sorted: range-partitioned and sorted by (class, rank, id), each partition
    holds a contiguous slice of every class's order; a tiny per-partition count table gives each
    partition's offset, which finds, per class, the (rank, id) of the last row within the quota.
    The wide rows are then filtered against those thresholds without being shuffled. Exact, fully
    parallel, and nothing but counts and one threshold per class reach the driver. The input is a
    Parquet checkpoint, so rank and id are the same in both passes over it.
    """
    from pyspark.sql import functions as F

    class_key = F.col(class_col).cast("string") if class_col else F.lit("")
    ranked = (
        df.withColumn("__class", class_key)
        .withColumn("__rank", row_hash(df, seed, salt, key))
        .withColumn("__row", F.monotonically_increasing_id())
    )
    thresholds = _thresholds(ranked.select("__class", "__rank", "__row"), quotas)
    keep = F.lit(False)
    for cls, (rank, row) in thresholds.items():
        within = (F.col("__rank") < F.lit(rank)) | ((F.col("__rank") == F.lit(rank)) & (F.col("__row") <= F.lit(row)))
        keep = keep | ((F.col("__class") == F.lit(cls)) & within)
    return ranked.where(keep).drop("__class", "__rank", "__row")


def _thresholds(narrow: DataFrame, quotas: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Per class with a positive quota: the (rank, row id) of its quota-th row in (rank, id) order."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    n_partitions = max(1, num_partitions(narrow))
    ordered = (
        narrow.repartitionByRange(n_partitions, "__class", "__rank", "__row")
        .sortWithinPartitions("__class", "__rank", "__row")
        .withColumn("__pid", F.spark_partition_id())
        .withColumn("__mid", F.monotonically_increasing_id())
    ).persist(StorageLevel.DISK_ONLY)  # on disk: 11M ranked rows unrolled in the server's heap ran it out
    try:
        counts = (
            ordered.groupBy("__pid", "__class").agg(F.count("*").alias("n"), F.min("__mid").alias("first")).collect()
        )
        offsets: dict[tuple[int, str], int] = {}
        running: dict[str, int] = {}
        for count in sorted(counts, key=lambda r: (r["__class"], r["__pid"])):
            offsets[(count["__pid"], count["__class"])] = running.get(count["__class"], 0) - count["first"]
            running[count["__class"]] = running.get(count["__class"], 0) + count["n"]
        missing = {c: (q, running.get(c, 0)) for c, q in quotas.items() if running.get(c, 0) < q}
        if missing:
            detail = ", ".join(f"{c or 'all rows'}: asked {q}, have {have}" for c, (q, have) in missing.items())
            raise StageFailedError(f"not enough rows to sample exactly: {detail}")
        offset_map = F.create_map(
            *[e for (pid, c), off in offsets.items() for e in (F.lit(f"{pid}|{c}"), F.lit(off).cast("long"))]
        )
        position = F.col("__mid") + offset_map[F.concat_ws("|", F.col("__pid").cast("string"), F.col("__class"))]
        last = {c: q - 1 for c, q in quotas.items() if q > 0}
        if not last:
            return {}
        last_map = F.create_map(*[e for c, p in last.items() for e in (F.lit(c), F.lit(p).cast("long"))])
        rows = ordered.where(position == last_map[F.col("__class")]).select("__class", "__rank", "__row").collect()
        return {r["__class"]: (int(r["__rank"]), int(r["__row"])) for r in rows}
    finally:
        ordered.unpersist()
