"""Synthetic Criteo click logs, written by Spark (the core of ``generate_criteo_logs`` and ``dagspec generate criteo``).

The exact raw format (tab separated, no header, label, I1..I13, C1..C26 as 8 hex characters, empty
field = missing), one file ``day_NN.tsv`` per day, generated in parallel by Spark partitions with
Spark SQL expressions only (seeded ``rand``/``randn`` and ``xxhash64``):

- integers: heavy-tailed counts (log-normal, floored), per-column missing rates averaging ~19%;
  I2 has a few negatives as in the real data;
- categoricals: per-column cardinalities from 3 to 2 million with power-law frequencies
  (``index = floor(K * u^a)``), the value the 32-bit hash of (column, index), so a value means
  the same across days; per-column missing rates averaging ~8%;
- label: Bernoulli(sigmoid(b0 + signal)); the signal mixes integer effects, per-value categorical
  effects and pairwise interactions (integer x categorical, categorical x categorical, integer x
  integer) that a linear model on hashed features cannot express, so trees can win. ``b0`` is
  calibrated on a 20k-row sample so the click rate is ``base_ctr`` (default 3%, the 1 TiB rate).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# missing rates (mean ~0.19 for integers, ~0.08 for categoricals)
INT_MISSING = [0.45, 0.0, 0.21, 0.22, 0.03, 0.23, 0.04, 0.0, 0.04, 0.45, 0.04, 0.76, 0.22]
INT_MU = [0.5, 1.8, 2.2, 1.6, 7.5, 3.5, 1.5, 2.5, 3.8, 0.3, 1.0, 0.4, 1.8]
INT_SIGMA = [1.2, 1.8, 1.6, 1.0, 2.2, 1.7, 1.6, 1.1, 1.4, 0.7, 0.9, 1.1, 1.2]
CAT_CARDINALITY = [
    1_400, 550, 2_000_000, 500_000, 300, 24, 12_000, 600, 3, 90_000, 5_000, 1_500_000, 3_000,
    27, 14_000, 1_000_000, 10, 5_000, 2_000, 4, 1_200_000, 18, 15, 100_000, 100, 80_000,
]  # fmt: skip
CAT_MISSING = [0.0, 0.0, 0.03, 0.03, 0.0, 0.12, 0.0, 0.0, 0.0, 0.0, 0.0, 0.03, 0.0,
               0.0, 0.0, 0.03, 0.0, 0.0, 0.44, 0.44, 0.03, 0.76, 0.0, 0.03, 0.44, 0.44]  # fmt: skip
CALIBRATION_ROWS = 20_000


def _u(seed: int, salt: int) -> Column:
    from pyspark.sql import functions as F

    return F.rand(seed * 1000 + salt)


def _effect(column: int, index: Column, scale: float) -> Column:
    """A fixed pseudo-random effect in [-scale, scale] for each value of a categorical column."""
    from pyspark.sql import functions as F

    return (F.pmod(F.xxhash64(F.lit(column), index, F.lit("effect")), F.lit(2001)) - 1000) / 1000.0 * scale


def criteo_frame(spark: SparkSession, rows: int, days: int, seed: int, partitions_per_day: int = 2) -> DataFrame:
    """Columns ``day``, ``signal`` (the logit without the intercept) and the 39 raw fields as strings."""
    from pyspark.sql import functions as F

    base = spark.range(0, rows, 1, numPartitions=max(1, days * partitions_per_day))
    day = F.floor(F.col("id") * days / F.lit(max(rows, 1))).cast("int")
    cols: dict[str, Column] = {"day": day}
    logs: dict[int, Column] = {}
    for j in range(13):
        raw = F.floor(F.exp(F.randn(seed * 1000 + 100 + j) * INT_SIGMA[j] + INT_MU[j])) - 1
        value = F.greatest(raw, F.lit(0)).cast("long")
        if j == 1:  # I2: a few small negatives, as in the real logs
            value = F.when(_u(seed, 200) < 0.05, -F.floor(_u(seed, 201) * 3).cast("long") - 1).otherwise(value)
        value = F.when(_u(seed, 300 + j) < INT_MISSING[j], F.lit(None)).otherwise(value)
        cols[f"I{j + 1}"] = value
        logs[j] = F.coalesce(F.log1p(F.greatest(value, F.lit(0)).cast("double")) - INT_MU[j], F.lit(0.0))
    indices: dict[int, Column] = {}
    for j, cardinality in enumerate(CAT_CARDINALITY):
        # power law: small indices are frequent; the exponent grows with the cardinality
        exponent = 1.5 + math.log10(cardinality) / 2
        index = F.floor(F.pow(_u(seed, 400 + j), exponent) * cardinality).cast("long")
        index = F.when(_u(seed, 500 + j) < CAT_MISSING[j], F.lit(None)).otherwise(index)
        indices[j] = index
        hashed = F.pmod(F.xxhash64(F.lit(j), index), F.lit(2**32))
        cols[f"C{j + 1}"] = F.when(index.isNull(), F.lit(None)).otherwise(F.lpad(F.lower(F.hex(hashed)), 8, "0"))

    def cat_effect(j: int, scale: float) -> Column:
        return F.coalesce(_effect(j, indices[j], scale), F.lit(0.0))

    signal = (
        0.35 * logs[0] - 0.25 * logs[2] + 0.2 * logs[5] + 0.3 * logs[10] - 0.15 * logs[12]
        + cat_effect(0, 0.6) + cat_effect(5, 0.8) + cat_effect(8, 0.7) + cat_effect(13, 0.6)
        + cat_effect(16, 0.7) + cat_effect(19, 0.5) + cat_effect(22, 0.6) + cat_effect(1, 0.4)
        # interactions a linear model cannot express
        + 1.2 * (logs[0] > 0.5).cast("double") * F.coalesce((indices[5] < 3).cast("double"), F.lit(0.0))
        + 2.0 * cat_effect(8, 1.0) * cat_effect(16, 1.0)
        - 0.8 * (logs[4] > 1.0).cast("double") * (logs[6] > 0.5).cast("double")
        + 0.6 * F.coalesce((indices[13] < 5).cast("double"), F.lit(0.0)) * logs[10]
    )  # fmt: skip
    # a null anywhere would make the label null: every term above is coalesced, this guards it
    cols["signal"] = F.coalesce(signal, F.lit(0.0))
    frame = base.select(*[c.alias(name) for name, c in cols.items()])
    return frame


def calibrate_intercept(spark: SparkSession, seed: int, base_ctr: float) -> float:
    """b0 such that mean(sigmoid(b0 + signal)) = base_ctr over a 20k-row sample (bisection)."""
    import numpy as np

    sample: Any = criteo_frame(spark, CALIBRATION_ROWS, 1, seed + 7919, 1).select("signal").toPandas()
    signal = sample["signal"].to_numpy(dtype=float)
    lo, hi = -20.0, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        rate = float(np.mean(1 / (1 + np.exp(-(mid + signal)))))
        lo, hi = (mid, hi) if rate < base_ctr else (lo, mid)
    return (lo + hi) / 2


def criteo_lines(
    spark: SparkSession, rows: int, days: int, seed: int, base_ctr: float, partitions_per_day: int = 2
) -> DataFrame:
    """``day``, ``label`` and ``value`` (the raw tab-separated line)."""
    from pyspark.sql import functions as F

    b0 = calibrate_intercept(spark, seed, base_ctr)
    frame = criteo_frame(spark, rows, days, seed, partitions_per_day)
    label = (_u(seed, 900) < 1 / (1 + F.exp(-(F.lit(b0) + F.col("signal"))))).cast("int")
    frame = frame.withColumn("label", label)
    fields = [F.col("label").cast("string")]
    fields += [F.coalesce(F.col(f"I{j}").cast("string"), F.lit("")) for j in range(1, 14)]
    fields += [F.coalesce(F.col(f"C{j}"), F.lit("")) for j in range(1, 27)]
    return frame.select("day", "label", F.concat_ws("\t", *fields).alias("value"))


def write_criteo_logs(
    spark: SparkSession,
    out: str,
    rows: int,
    days: int,
    seed: int,
    base_ctr: float = 0.03,
    partitions_per_day: int = 2,
    compress: bool = False,
) -> dict[str, float]:
    """Write ``out/day_NN.tsv[.gz]`` (replacing ``out`` atomically); returns rows and click rate.

    Spark writes the text files into a temporary sibling of ``out``; the day files are then renamed
    into a staged directory that replaces ``out`` (``dagspec.storage``, no JVM needed).
    """
    import uuid

    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from dagspec import checkpoint, storage

    suffix = ".tsv.gz" if compress else ".tsv"
    if rows == 0:  # nothing to generate (a pipeline reading real logs instead): empty day files
        for d in range(days):
            storage.write_text(f"{out}/day_{d:02d}{suffix}", "")
        return {"rows": 0.0, "ctr": 0.0}
    # one pass, nothing cached: the rows and the click rate are observed while the files are written
    # (caching the lines held them in the Spark Connect server's heap: 12.1M lines ran its 4g out)
    observation = Observation("criteo_logs")
    lines = criteo_lines(spark, rows, days, seed, base_ctr, partitions_per_day).observe(
        observation, F.count(F.lit(1)).alias("rows"), F.avg("label").alias("ctr")
    )
    tmp = f"{out.rstrip('/')}.__tmp-{uuid.uuid4().hex[:8]}"
    writer = lines.select("day", "value").repartition(days, "day").write.partitionBy("day").mode("error")
    if compress:
        writer = writer.option("compression", "gzip")
    writer.text(tmp)
    staged = f"{tmp}/files"
    storage.makedirs(staged)
    for d in range(days):
        parts = [n for n in storage.list_names(f"{tmp}/day={d}") if n.startswith("part-")]
        target = f"{staged}/day_{d:02d}{suffix}"
        if not parts:  # a day without rows (rows < days) still gets its (empty) file
            storage.write_text(target, "")
            continue
        if len(parts) != 1:
            raise RuntimeError(f"expected one file for day {d}, got {parts}")
        storage.rename(f"{tmp}/day={d}/{parts[0]}", target)
    stats = observation.get
    checkpoint.replace_folder(staged, out)
    storage.delete(tmp)
    return {"rows": float(stats["rows"]), "ctr": float(stats["ctr"] or 0.0)}
