"""Synthetic Criteo click logs, written by Spark (the core of ``generate_criteo_logs`` and ``dagspec generate criteo``).

The exact raw format (tab separated, no header, label, I1..I13, C1..C26 as 8 hex characters, empty
field = missing), one file ``day_NN.tsv`` per day, generated in parallel by Spark partitions with
Spark SQL expressions only (seeded ``rand``/``randn`` and ``xxhash64``):

- integers: heavy-tailed counts (log-normal, floored), missing rates (mean ~19%, in co-missing
  groups) and I8's -1, fitted to the bundled 1,000 lines of the 1 TiB logs;
- categoricals: the 1 TiB logs' per-column distinct counts (3 to 293 million), a head value and a
  power law fitted to the sample's number of distinct values, the value the 32-bit hash of
  (column, index), so a value means the same across days; the sample's missing rates (mean ~8%);
- label: Bernoulli(sigmoid(b0 + signal)); the signal has a part a linear model learns too (four
  integers' log1p; per-value effects of categorical values, none for a column's head, smaller for
  rarer values, grouped so that more lines make more of it learnable) and a part only trees learn
  (waves and surfaces: cosines of integers' log1p, which trees follow finer with more lines, and a
  few pairwise interactions). Calibrated so that xgb_single's learning curve follows the published
  one from 10^4 to 10^7 lines and VW's stays below it (bench/generator_calibration.py; docs/ctr.md,
  "Synthetic logs").
  ``b0`` is calibrated on a 20k-row sample so the click rate is ``base_ctr`` (default 3.4%).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Integers, fitted to the bundled 1 TiB sample (1,000 lines): missing rates (mean 0.19), log-normal
# mu and sigma of floor(exp(x)) - 1 + INT_MIN (matching its zero share and 25/90/99th percentiles).
INT_MISSING = [0.23, 0.09, 0.25, 0.52, 0.44, 0.09, 0.03, 0.0, 0.0, 0.09, 0.44, 0.01, 0.25]
INT_MU = [2.2, 5.2, 1.8, 3.7, 2.1, -0.8, -1.6, 3.0, 1.5, 0.1, 1.4, 7.8, 1.9]
INT_SIGMA = [1.5, 1.4, 0.9, 1.6, 1.3, 1.6, 1.2, 2.1, 1.3, 0.7, 0.7, 2.1, 1.0]
INT_MIN = [1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0]  # the sample's I1, I2, I5, I11 are never 0
# columns missing together in the sample share one draw (the same group number)
INT_MISSING_GROUP = [0, 1, 2, 3, 4, 1, 5, 6, 7, 1, 4, 8, 2]
I8_NEGATIVE = 0.055  # the sample's only negatives: I8 = -1 on 5.5% of lines
# Categoricals: the per-column distinct counts of the 1 TiB logs (24 days, 4.4 billion lines; the
# embedding table sizes of DLRM's "terabyte" setting), power-law frequencies, so the values seen keep
# growing with the lines; missing rates of the 1 TiB sample (mean 0.08), in two co-missing groups.
CAT_CARDINALITY = [
    227_605_432, 39_060, 17_295, 7_424, 20_265, 3, 7_122, 1_543, 63, 130_229_467, 3_067_956, 405_282, 10,
    2_209, 11_938, 155, 4, 976, 14, 292_775_614, 40_790_948, 187_188_510, 590_152, 12_973, 108, 36,
]  # fmt: skip
CAT_MISSING = [0.022, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.022, 0.022, 0.0, 0.0,
               0.46, 0.0, 0.46, 0.46, 0.0, 0.0, 0.022, 0.022, 0.022, 0.46, 0.0, 0.0, 0.0]  # fmt: skip
CAT_MISSING_GROUP = [20 if m == 0.022 else 21 if m == 0.46 else 22 + j for j, m in enumerate(CAT_MISSING)]
# Frequencies: index 0 (the head) on CAT_HEAD of the lines (the sample's top share), the other lines
# index = floor(cardinality * u^CAT_EXPONENT), the exponent giving the sample's number of distinct
# values in its 1,000 lines (C1: 306). That law's own index 0 adds to the head, which is therefore
# more frequent than in the sample (C1 66% against 38%; docs/ctr.md, "Synthetic logs").
CAT_HEAD = [0.382, 0.139, 0.03, 0.273, 0.213, 0.867, 0.032, 0.142, 0.528, 0.382, 0.382, 0.259, 0.343,
            0.876, 0.139, 0.879, 0.852, 0.512, 0.431, 0.382, 0.382, 0.382, 0.694, 0.026, 0.524, 0.368]  # fmt: skip
CAT_EXPONENT = [24.2, 12.0, 5.9, 20.9, 17.6, 102.4, 6.4, 17.0, 103.1, 24.8, 28.5, 6.4, 51.4,
                5.9, 13.6, 25.3, 30.7, 50.6, 39.3, 24.6, 26.4, 24.7, 9.2, 7.1, 142.3, 72.2]  # fmt: skip
# The signal's parts: per-value effects (uniform in [-scale, scale]) of the categorical columns, by how
# many lines a model needs to tell their values apart (xgboost's min_child_weight 20 needs ~700 lines
# of a value at 3% clicks): docs/ctr.md, "Synthetic logs".
CAT_GROUPS = {  # name: (columns, effect scale)
    "early": ([5, 8, 12, 15, 16, 18, 24, 25], 0.22),  # <= 155 values: nearly all lines on the head
    "slow": ([0, 1, 3, 4, 7, 9, 10, 13, 14, 17, 19, 20, 21, 22], 0.3),  # a large head, a tail never learned
    "growing": ([2, 6, 11, 23], 1.0),  # a small head: learned more with every decade of lines
}
BASE_CTR = 0.034  # the default click rate (docs/ctr.md, "Synthetic logs": why not 0.03)
INTEGER_EFFECTS = {0: 0.189, 2: -0.28, 7: 0.143, 10: 0.28}  # column -> coefficient of its centred log1p
INTERACTION_SCALE = 0.2
# non-linear integer effects a linear model cannot express; trees approximate them step by step, the
# finer the more lines (a leaf needs ~600 lines at 3.4% clicks): column -> (amplitude, wavelength),
# amplitude * cos(2 pi z / wavelength) of the column's standardized centred log1p z
INT_WAVES: dict[int, tuple[float, float]] = {1: (0.35, 1.0), 8: (0.35, 1.0), 11: (0.35, 0.7)}
# the same over two columns at once, (a, b, amplitude, wavelength): a surface, learned later than a curve
INT_SURFACES: list[tuple[int, int, float, float]] = [(4, 12, 0.3, 1.0), (5, 9, 0.3, 0.8)]
# rarer values have smaller effects: scale * (1 + index / M) ** -beta, (M, beta); beta 0: none
EFFECT_DAMPING: tuple[float, float] = (60.0, 1.0)
SIGNAL_SCALE = 1.1  # all of the signal: the calibration knob of bench/generator_calibration.py
CALIBRATION_ROWS = 20_000


def cat_scale(column: int) -> float:
    """The effect scale of a categorical column (0-based): its group's (``CAT_GROUPS``)."""
    return next(scale for columns, scale in CAT_GROUPS.values() if column in columns)


def _u(seed: int, salt: int) -> Column:
    from pyspark.sql import functions as F

    return F.rand(seed * 1000 + salt)


def _effect(column: int, index: Column, scale: float) -> Column:
    """A fixed pseudo-random effect in [-scale, scale] for each value of a categorical column but its
    most frequent one (index 0, the head: the column's average lines, effect 0)."""
    from pyspark.sql import functions as F

    effect = (F.pmod(F.xxhash64(F.lit(column), index, F.lit("effect")), F.lit(2001)) - 1000) / 1000.0 * scale
    knee, beta = EFFECT_DAMPING
    if beta:
        effect = effect * F.pow(1 + index / F.lit(knee), F.lit(-beta))
    return F.when(index == 0, F.lit(0.0)).otherwise(effect)


def _draws(spark: SparkSession, rows: int, days: int, seed: int, partitions: int) -> DataFrame:
    """``day`` and every random number a line needs, each drawn once, as a column of its own.

    The values and the signal read these columns: a ``rand`` repeated inside ``when`` branches would
    be a draw of its own, skipped on the rows the branch skips, and the copies would drift apart (a
    value's effect computed from another line's draw).
    """
    from pyspark.sql import functions as F

    base = spark.range(0, rows, 1, numPartitions=partitions)
    columns = [F.floor(F.col("id") * days / F.lit(max(rows, 1))).cast("int").alias("day")]
    columns += [F.randn(seed * 1000 + 100 + j).alias(f"_x{j}") for j in range(13)]
    columns += [_u(seed, 200).alias("_negative")]
    columns += [_u(seed, 300 + g).alias(f"_int_missing{g}") for g in sorted(set(INT_MISSING_GROUP))]
    columns += [_u(seed, 400 + j).alias(f"_tail{j}") for j in range(len(CAT_CARDINALITY))]
    columns += [_u(seed, 600 + j).alias(f"_head{j}") for j in range(len(CAT_CARDINALITY))]
    columns += [_u(seed, 500 + g).alias(f"_cat_missing{g}") for g in sorted(set(CAT_MISSING_GROUP))]
    return base.select(*columns)


def criteo_frame(spark: SparkSession, rows: int, days: int, seed: int, partitions_per_day: int = 2) -> DataFrame:
    """Columns ``day``, ``signal`` (the logit without the intercept) and the 39 raw fields as strings."""
    from pyspark.sql import functions as F

    draws = _draws(spark, rows, days, seed, max(1, days * partitions_per_day))
    values: list[Column] = [F.col("day")]
    for j in range(13):
        raw = F.floor(F.exp(F.col(f"_x{j}") * INT_SIGMA[j] + INT_MU[j])) - 1 + INT_MIN[j]
        value = F.greatest(raw, F.lit(INT_MIN[j])).cast("long")
        if j == 7:  # I8: the only negatives, -1
            value = F.when(F.col("_negative") < I8_NEGATIVE, F.lit(-1).cast("long")).otherwise(value)
        missing = F.col(f"_int_missing{INT_MISSING_GROUP[j]}") < INT_MISSING[j]
        values.append(F.when(missing, F.lit(None)).otherwise(value).alias(f"I{j + 1}"))
    for j, cardinality in enumerate(CAT_CARDINALITY):
        # a head value, then a power law: small indices are frequent
        tail = F.floor(F.pow(F.col(f"_tail{j}"), CAT_EXPONENT[j]) * cardinality)
        index = F.when(F.col(f"_head{j}") < CAT_HEAD[j], F.lit(0)).otherwise(tail).cast("long")
        missing = F.col(f"_cat_missing{CAT_MISSING_GROUP[j]}") < CAT_MISSING[j]
        values.append(F.when(missing, F.lit(None)).otherwise(index).alias(f"_k{j}"))
    lines = draws.select(*values)
    logs = {
        j: F.coalesce(F.log1p(F.greatest(F.col(f"I{j + 1}"), F.lit(0)).cast("double")) - INT_MU[j], F.lit(0.0))
        for j in range(13)
    }
    indices = {j: F.col(f"_k{j}") for j in range(len(CAT_CARDINALITY))}
    cols: dict[str, Column] = {"day": F.col("day")}
    cols.update({f"I{j + 1}": F.col(f"I{j + 1}") for j in range(13)})
    for j, index in indices.items():
        hashed = F.pmod(F.xxhash64(F.lit(j), index), F.lit(2**32))
        cols[f"C{j + 1}"] = F.when(index.isNull(), F.lit(None)).otherwise(F.lpad(F.lower(F.hex(hashed)), 8, "0"))

    def cat_effect(j: int, scale: float) -> Column:
        return F.coalesce(_effect(j, indices[j], scale), F.lit(0.0))

    def flag(condition: Column) -> Column:
        return F.coalesce(condition.cast("double"), F.lit(0.0))

    integers = sum((coefficient * logs[j] for j, coefficient in INTEGER_EFFECTS.items()), F.lit(0.0))
    categoricals = [cat_effect(j, cat_scale(j)) for j in range(len(CAT_CARDINALITY))]
    # interactions a linear model cannot express
    interactions = INTERACTION_SCALE * (
        0.5 * flag(logs[0] > 0.5) * flag(indices[12] < 3)
        + 0.8 * cat_effect(8, 1.0) * cat_effect(16, 1.0)
        - 0.3 * flag(logs[4] > 1.0) * flag(F.col("I6") > 0)
        + 0.3 * flag(indices[25] < 5) * logs[10]
    )

    def wave(j: int, wavelength: float) -> Column:
        return F.cos(logs[j] * (2 * math.pi / (INT_SIGMA[j] * wavelength)))

    waves = [amplitude * wave(j, wavelength) for j, (amplitude, wavelength) in INT_WAVES.items()]
    waves += [amplitude * wave(a, wavelength) * wave(b, wavelength) for a, b, amplitude, wavelength in INT_SURFACES]
    nonlinear = sum(waves, F.lit(0.0))
    signal = F.lit(SIGNAL_SCALE) * (integers + sum(categoricals, F.lit(0.0)) + interactions + nonlinear)
    # a null anywhere would make the label null: every term above is coalesced, this guards it
    cols["signal"] = F.coalesce(signal, F.lit(0.0))
    return lines.select(*[c.alias(name) for name, c in cols.items()])


def calibrate_intercept(spark: SparkSession, seed: int, base_ctr: float = BASE_CTR) -> float:
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
    base_ctr: float = BASE_CTR,
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
