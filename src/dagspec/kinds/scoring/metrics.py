"""Distributed classification metrics: a model's predictions reduced by Spark, never collected.

Two passes over the (persisted) predictions, which ``evaluate`` builds as ``label_idx`` (int),
``probability`` (array<double>) and ``pred_idx`` (int):

1. one ``groupBy(label, prediction)`` gives the confusion matrix, accuracy and the summed log loss;
2. the exact ROC AUC of every class against the rest, by rank aggregation: the (class, score)
   pairs are range-partitioned and sorted, so ties share a partition and each partition holds a
   contiguous score range of a class. Each partition reports, per class, its positive and
   negative counts and ``sum(pos_s * (neg_below_s + neg_s / 2))`` over its distinct scores; the
   driver adds the negatives of the lower partitions. That is the Mann-Whitney statistic with
   ties counted half, i.e. exactly sklearn's ``roc_auc_score``. The same pass keeps about
   ``curve_points`` points of each exact ROC curve for the plots, and the sums of the squared
   placements that give DeLong's variance (``intervals.PlacementSums``, chained the same way).

Only per-(label, prediction) counts and per-partition summaries reach the driver.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, NumericType

from dagspec.errors import StageFailedError
from dagspec.kinds.scoring.flavor_base import PROBABILITY
from dagspec.kinds.scoring.intervals import AucVariance, PlacementSums, chain, chunk_sums, delong

_DISTINCT_SCHEMA = "k int, score double, pos double, neg double"
_PARTIAL_SCHEMA = (
    "k int, start double, total boolean, pos double, neg double, auc_sum double, score double,"
    " pos_l2 double, neg_q double, neg_q2 double"
)


NULL_LABEL = -2


def label_index(data_type: Any, label: Column, classes: Sequence[int]) -> Column:
    """The position of each row's class in ``classes`` (-1: not a class, -2: null); one-hot labels by argmax."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.ml.linalg import VectorUDT

    if isinstance(data_type, VectorUDT | ArrayType):
        if isinstance(data_type, VectorUDT):
            label = vector_to_array(label)
        if_valid = F.size(label) == len(classes)
        position = F.when(if_valid, F.array_position(label, F.array_max(label)) - 1).otherwise(-1)
        return F.when(label.isNull(), NULL_LABEL).otherwise(position).cast("int")
    if not isinstance(data_type, NumericType):
        raise StageFailedError(f"label column must be numeric class values or one-hot arrays, got {data_type}")
    # a class value, compared exactly: 1.5 is not class 1
    as_double = label.cast("double")
    position = F.array_position(F.array(*[F.lit(float(c)) for c in classes]), as_double) - 1
    return F.when(label.isNull(), NULL_LABEL).otherwise(F.coalesce(position.cast("int"), F.lit(-1)))


def counts_metrics(
    scored: DataFrame, classes: Sequence[int], clip_eps: float, label_col: str = "label"
) -> dict[str, Any]:
    """Rows, accuracy, log loss and the confusion matrix from one grouped aggregation."""
    k = len(classes)
    true_p = F.when(F.col("label_idx") >= 0, F.element_at(PROBABILITY, F.col("label_idx") + 1))
    clipped = F.least(F.greatest(true_p, F.lit(clip_eps)), F.lit(1.0 - clip_eps))
    bad_probability = F.exists(PROBABILITY, lambda p: F.isnan(p) | p.isNull()) | (F.size(PROBABILITY) != k)
    rows = (
        scored.groupBy("label_idx", "pred_idx")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(-F.log(clipped)).alias("log_loss"),
            F.sum(bad_probability.cast("long")).alias("bad"),
        )
        .collect()
    )
    nulls = sum(r["n"] for r in rows if r["label_idx"] == NULL_LABEL)
    unknown = sum(r["n"] for r in rows if r["label_idx"] == -1)
    if nulls or unknown:
        total = sum(r["n"] for r in rows)
        problems = [f"{nulls} of {total} rows have a null label in {label_col!r}"] if nulls else []
        if unknown:
            problems.append(
                f"{unknown} of {total} rows have a label in {label_col!r} that is not one of the model's classes "
                f"{list(classes)}"
            )
        raise StageFailedError("evaluate: " + "; ".join(problems) + "; drop or fix those rows before evaluating")
    bad = sum(r["bad"] for r in rows)
    if bad:
        raise StageFailedError(f"the model gave {bad} rows NaN, null or not {k} probabilities")
    total = sum(r["n"] for r in rows)
    if total == 0:
        raise StageFailedError("the evaluation data is empty")
    matrix = [[0] * k for _ in range(k)]
    for r in rows:
        matrix[r["label_idx"]][r["pred_idx"]] += r["n"]
    correct = sum(matrix[i][i] for i in range(k))
    per_class = {}
    for i, c in enumerate(classes):
        support = sum(matrix[i])
        predicted = sum(matrix[j][i] for j in range(k))
        per_class[str(c)] = {
            "support": support,
            "precision": matrix[i][i] / predicted if predicted else None,
            "recall": matrix[i][i] / support if support else None,
        }
    return {
        "rows": total,
        "accuracy": correct / total,
        "log_loss": sum(r["log_loss"] for r in rows) / total,
        "confusion_matrix": {
            "rows": "true class",
            "columns": "predicted class",
            "classes": list(classes),
            "matrix": matrix,
        },
        "per_class": per_class,
    }


@dataclass
class RocPass:
    """The rank-aggregation pass over one model's scores, per class index ``k``."""

    aucs: dict[str, float | None]  # by class value, as in metrics.json
    curves: dict[str, dict[str, list[float]]]
    variances: dict[str, AucVariance]  # DeLong's
    distinct: DataFrame  # (k, score, pos, neg): range-partitioned, sorted within partitions
    pairs: DataFrame  # the (k, score, pos) pairs ``distinct`` aggregates, with the kept columns
    before: dict[tuple[int, float], PlacementSums]  # (k, first score of a partition) -> the sums below it
    totals: dict[int, tuple[float, float]]  # k -> (positives, negatives)


def roc_curves(
    spark: SparkSession,
    scored: DataFrame,
    classes: Sequence[int],
    class_totals: Mapping[int, tuple[float, float]],
    curve_points: int,
) -> tuple[dict[str, float | None], dict[str, dict[str, list[float]]]]:
    """Exact one-vs-rest ROC AUC and about ``curve_points`` ROC points of each class (see ``roc_pass``)."""
    result = roc_pass(spark, scored, classes, class_totals, curve_points)
    return result.aucs, result.curves


def roc_pass(
    spark: SparkSession,
    scored: DataFrame,
    classes: Sequence[int],
    class_totals: Mapping[int, tuple[float, float]],
    curve_points: int,
    keep: Sequence[str] = (),
) -> RocPass:
    """Exact one-vs-rest ROC AUC, DeLong's variance and ROC points of each class in ``class_totals``.

    ``scored``: ``label_idx`` (int) and ``probability`` (array<double>); ``class_totals``: class
    index -> (positives, negatives), from ``counts_metrics``. Binary evaluation passes only the
    positive class: the other curve is its mirror image. ``keep``: columns of ``scored`` kept in
    ``pairs`` (a row key, for the per-row placements of the paired tests).
    """
    if len(class_totals) == 1:
        (only,) = class_totals
        pairs = scored.select(
            *keep,
            F.lit(only).alias("k"),
            F.element_at(PROBABILITY, only + 1).alias("score"),
            (F.col("label_idx") == only).cast("double").alias("pos"),
        )
    else:
        pairs = scored.select(*keep, F.posexplode(PROBABILITY).alias("k", "score"), "label_idx").select(
            *keep,
            F.col("k").cast("int").alias("k"),
            "score",
            (F.col("label_idx") == F.col("k")).cast("double").alias("pos"),
        )
    # a point every `step` rows of a class inside each partition: about curve_points per class
    steps = {k: max(1.0, (pos + neg) / curve_points) for k, (pos, neg) in class_totals.items()}
    n_partitions = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
    # the JVM counts the ties; then range partitioning sends equal (k, score) keys to one
    # partition, sorted, and nothing after it may shuffle again: a groupBy placed after the range
    # exchange was given a hash shuffle of its own when a row key was kept (partitions overlapped).
    # The Python step merges any (k, score) the aggregation left split (none when it ran whole).
    distinct = (
        pairs.groupBy("k", "score")
        .agg(F.sum("pos").alias("pos"), F.sum(1.0 - F.col("pos")).alias("neg"))
        .repartitionByRange(n_partitions, "k", "score")
        .sortWithinPartitions("k", "score")
        .mapInPandas(_distinct_scores, _DISTINCT_SCHEMA)
    )
    if keep:  # the placements pass reads the same partitions again (the caller unpersists)
        distinct = distinct.persist()
    partials = distinct.mapInPandas(lambda batches: _partition_partials(batches, steps), _PARTIAL_SCHEMA).collect()
    result = RocPass({}, {}, {}, distinct, pairs, {}, dict(class_totals))
    for k, (total_pos, total_neg) in sorted(class_totals.items()):
        mine = [r for r in partials if r["k"] == k]
        key = str(classes[k])
        result.aucs[key], result.curves[key], result.variances[key] = _combine(mine, total_pos, total_neg)
        below = PlacementSums()
        for total in sorted((r for r in mine if r["total"]), key=lambda r: r["start"]):
            result.before[(k, total["start"])] = below
            below = below.then(_sums(total))
    return result


def _sums(total: Any) -> PlacementSums:
    return PlacementSums(
        pos=total["pos"],
        neg=total["neg"],
        pos_l=total["auc_sum"],
        pos_l2=total["pos_l2"],
        neg_q=total["neg_q"],
        neg_q2=total["neg_q2"],
    )


def _distinct_scores(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Sorted (k, score, pos, neg) rows -> one row per distinct (k, score); a tie may span batches."""
    carry: pd.DataFrame | None = None
    for batch in batches:
        if carry is not None:
            batch = pd.concat([carry, batch], ignore_index=True)
        if batch.empty:
            continue
        # the last score may go on in the next batch: hold it back
        tail = (batch["k"] == batch["k"].iloc[-1]) & (batch["score"] == batch["score"].iloc[-1])
        carry = batch[tail]
        if not tail.all():
            yield _count_ties(batch[~tail])
    if carry is not None and not carry.empty:
        yield _count_ties(carry)


def _count_ties(rows: pd.DataFrame) -> pd.DataFrame:
    grouped = rows.groupby(["k", "score"], sort=True)[["pos", "neg"]].sum().reset_index()
    return pd.DataFrame(
        {
            "k": grouped["k"].astype("int32"),
            "score": grouped["score"],
            "pos": grouped["pos"].astype("float64"),
            "neg": grouped["neg"].astype("float64"),
        }
    )


def _partition_partials(batches: Iterator[pd.DataFrame], steps: Mapping[int, float]) -> Iterator[pd.DataFrame]:
    """Per class in this partition: totals and DeLong's placement sums (one row), and curve points."""
    import numpy as np

    state: dict[int, dict[str, Any]] = {}
    for batch in batches:
        for k, group in batch.groupby("k", sort=False):
            s = state.setdefault(
                int(k),
                {"start": float(group["score"].iloc[0]), "sums": PlacementSums(), "next_point": steps[int(k)]},
            )
            pos = group["pos"].to_numpy(dtype=np.float64)
            neg = group["neg"].to_numpy(dtype=np.float64)
            before: PlacementSums = s["sums"]
            cum_pos = before.pos + np.cumsum(pos)
            cum_neg = before.neg + np.cumsum(neg)
            seen = cum_pos + cum_neg
            # the first distinct score at or past each multiple of the step becomes a curve point
            marks = np.arange(s["next_point"], seen[-1] + 1e-9, steps[int(k)])
            if len(marks):
                at = np.unique(np.searchsorted(seen, marks - 1e-9))
                s["next_point"] = float(marks[-1] + steps[int(k)])
                yield pd.DataFrame(
                    {
                        "k": int(k),
                        "start": s["start"],
                        "total": False,
                        "pos": cum_pos[at],
                        "neg": cum_neg[at],
                        "auc_sum": 0.0,
                        "score": group["score"].to_numpy()[at],
                        "pos_l2": 0.0,
                        "neg_q": 0.0,
                        "neg_q2": 0.0,
                    }
                )
            s["sums"] = before.then(chunk_sums(pos, neg))
            s["end"] = float(group["score"].iloc[-1])
    for k, s in state.items():
        sums: PlacementSums = s["sums"]
        yield pd.DataFrame(
            {
                "k": [k],
                "start": [s["start"]],
                "total": [True],
                "pos": [sums.pos],
                "neg": [sums.neg],
                "auc_sum": [sums.pos_l],
                "score": [s["end"]],  # the partition's last score of the class
                "pos_l2": [sums.pos_l2],
                "neg_q": [sums.neg_q],
                "neg_q2": [sums.neg_q2],
            }
        )


def _combine(
    partials: Sequence[Any], total_pos: float, total_neg: float
) -> tuple[float | None, dict[str, list[float]], AucVariance]:
    """Chain the partitions of one class in score order: the AUC, the ROC curve (fpr, tpr), the variance."""
    points: list[tuple[float, float]] = []
    pos_before = neg_before = 0.0
    totals = sorted((r for r in partials if r["total"]), key=lambda r: r["start"])
    if any(a["score"] >= b["start"] for a, b in itertools.pairwise(totals)):
        # ties split across partitions would be counted wrong: never let that pass silently
        raise StageFailedError("internal: the ROC pass's partitions are not disjoint score ranges")
    for total in totals:
        for r in partials:
            if not r["total"] and r["start"] == total["start"]:
                points.append((pos_before + r["pos"], neg_before + r["neg"]))
        pos_before += total["pos"]
        neg_before += total["neg"]
    variance = delong(chain(_sums(t) for t in totals))
    if total_pos == 0 or total_neg == 0:
        return None, {"fpr": [0.0, 1.0], "tpr": [0.0, 1.0]}, variance
    # a point (pos, neg seen at or below a score) is the threshold just above it: the rest is positive
    roc = {(1.0 - neg / total_neg, 1.0 - pos / total_pos) for pos, neg in points} | {(0.0, 0.0), (1.0, 1.0)}
    fpr, tpr = zip(*sorted(roc), strict=True)
    return variance.auc, {"fpr": list(fpr), "tpr": list(tpr)}, variance
