"""Per-row DeLong placements (written by evaluate) and the paired DeLong test (read by compare, gate).

A paired test of two models' AUCs needs, for each row both evaluated, the placement of the row's
score among the other class: ``V10`` for a positive, ``V01`` for a negative (``intervals``).
evaluate computes them from the same range-partitioned distinct scores as the AUC, with the sums
below each partition that the driver already has, joins them back to the rows by (class, score)
and writes ``placements/`` (Parquet: ``key``, ``k`` the class index, ``positive``, ``placement``).
The test joins two such tables on (key, k) and reduces the pairs to a few sums per class.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from functools import reduce
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dagspec.errors import StageFailedError
from dagspec.kinds.evaluation_report import EvaluationReport
from dagspec.kinds.scoring.intervals import PairedSums, PlacementSums, chunk_sums, paired_delong, placements
from dagspec.kinds.scoring.metrics import RocPass

PLACEMENTS_DIR = "placements"
_SCHEMA = "k int, score double, v10 double, v01 double"
# the placement moments ``PairedSums`` keeps per side: the sum of the product of these columns
_MOMENTS = ("a", "b", "aa", "bb", "ab")


def write_placements(result: RocPass, key_col: str, path: str) -> None:
    """Write every row's placement for every class of ``result`` (its ``pairs`` must keep ``key_col``)."""
    before, totals = result.before, result.totals
    table = result.distinct.mapInPandas(lambda batches: _distinct_placements(batches, before, totals), _SCHEMA)
    rows = result.pairs.join(table, ["k", "score"]).select(
        F.col(key_col).alias("key"),
        "k",
        (F.col("pos") == 1.0).alias("positive"),
        F.when(F.col("pos") == 1.0, F.col("v10")).otherwise(F.col("v01")).alias("placement"),
    )
    rows.write.mode("error").parquet(path)


def _distinct_placements(
    batches: Iterator[pd.DataFrame],
    before: Mapping[tuple[int, float], PlacementSums],
    totals: Mapping[int, tuple[float, float]],
) -> Iterator[pd.DataFrame]:
    below: dict[int, PlacementSums] = {}
    for batch in batches:
        for k, group in batch.groupby("k", sort=False):
            k = int(k)
            if k not in below:  # the partition's first score of this class: the driver knows what is below
                below[k] = before[(k, float(group["score"].iloc[0]))]
            pos = group["pos"].to_numpy(dtype=np.float64)
            neg = group["neg"].to_numpy(dtype=np.float64)
            m, n = totals[k]
            v10, v01 = placements(pos, neg, below[k], m, n)
            below[k] = below[k].then(chunk_sums(pos, neg))
            yield pd.DataFrame({"k": k, "score": group["score"].to_numpy(), "v10": v10, "v01": v01})


def paired_sums(spark: SparkSession, path_a: str, path_b: str) -> tuple[dict[int, PairedSums], int, int]:
    """Per class index: the sums of the rows both placement tables hold; rows matched, rows disagreeing.

    Rows disagreeing: the same key and class, but positive in one table and negative in the other
    (different labels: not the same rows).
    """
    a = spark.read.parquet(path_a).select("key", "k", F.col("positive").alias("pa"), F.col("placement").alias("a"))
    b = spark.read.parquet(path_b).select("key", "k", F.col("positive").alias("pb"), F.col("placement").alias("b"))
    joined = a.join(b, ["key", "k"])
    grouped = (
        joined.groupBy("k", "pa", "pb")
        .agg(
            F.count(F.lit(1)).alias("n"),
            *[F.sum(reduce(operator.mul, [F.col(c) for c in m])).alias(f"s{m}") for m in _MOMENTS],
        )
        .collect()
    )
    disagreeing = sum(r["n"] for r in grouped if r["pa"] != r["pb"])
    by_k: dict[int, dict[bool, Any]] = {}
    for r in grouped:
        if r["pa"] == r["pb"]:
            by_k.setdefault(int(r["k"]), {})[bool(r["pa"])] = r
    sums = {k: _paired(sides) for k, sides in by_k.items()}
    matched = max((int(s.pos + s.neg) for s in sums.values()), default=0)
    return sums, matched, disagreeing


def _paired(sides: Mapping[bool, Any]) -> PairedSums:
    def get(positive: bool, name: str) -> float:
        row = sides.get(positive)
        return float(row[name]) if row is not None else 0.0

    sides_sums = {
        f"{side}_{m}": get(positive, f"s{m}") for side, positive in (("pos", True), ("neg", False)) for m in _MOMENTS
    }
    return PairedSums(pos=get(True, "n"), neg=get(False, "n"), **sides_sums)


def paired_tests(
    spark: SparkSession,
    report_a: tuple[EvaluationReport, str],
    report_b: tuple[EvaluationReport, str],
    level: float,
) -> dict[str, Any]:
    """Paired DeLong tests of two evaluate reports (metrics, folder), per class value.

    Fails when either report has no placements or the reports are not over the same rows.
    """
    (a, folder_a), (b, folder_b) = report_a, report_b
    for evaluation, folder in ((a, folder_a), (b, folder_b)):
        if not evaluation.placements:
            raise StageFailedError(
                f"the report of {evaluation.model!r} ({folder}) has no per-row placements: "
                "set key_col on its evaluate stage to test AUCs paired"
            )
    sums, matched, disagreeing = paired_sums(spark, f"{folder_a}/{PLACEMENTS_DIR}", f"{folder_b}/{PLACEMENTS_DIR}")
    if disagreeing or matched != a.rows or matched != b.rows:
        raise StageFailedError(
            f"the reports of {a.model!r} ({a.rows} rows) and {b.model!r} ({b.rows} rows) are "
            f"not over the same rows: {matched} keys match, {disagreeing} of them with different labels "
            "(are the keys unique and the test data the same?)"
        )
    return {str(a.classes[k]): paired_delong(s, level) for k, s in sorted(sums.items())}
