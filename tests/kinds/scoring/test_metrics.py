"""Distributed metrics against sklearn's exact values, on real Spark and 100k rows."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sklearn.metrics import accuracy_score, confusion_matrix, log_loss, roc_auc_score, roc_curve

from dagspec.errors import StageFailedError
from dagspec.kinds.scoring.metrics import counts_metrics, label_index, roc_curves

pytestmark = pytest.mark.spark


def _scored(probs: DataFrame) -> DataFrame:
    """The (label_idx, probability, pred_idx) frame evaluate builds, from (label_idx, probability)."""
    position = F.array_position("probability", F.array_max("probability")) - 1
    return probs.withColumn("pred_idx", position.cast("int"))


def _totals(metrics: dict, classes: list[int]) -> dict[int, tuple[float, float]]:
    support = [metrics["per_class"][str(c)]["support"] for c in classes]
    return {k: (float(n), float(metrics["rows"] - n)) for k, n in enumerate(support)}


def _local(df: DataFrame) -> tuple[np.ndarray, np.ndarray]:
    rows = df.select("label_idx", "probability").collect()  # the test's reference only
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def test_binary_metrics_match_sklearn_on_100k_rows_with_ties(spark) -> None:
    n = 100_000
    base = spark.range(n, numPartitions=4).withColumn("label_idx", (F.rand(1) < 0.3).cast("int"))
    # rounded scores make thousands of ties across positives and negatives; a few exact 0 and 1
    p1 = F.round(1 / (1 + F.exp(-(1.2 * F.col("label_idx") + F.randn(2) * 1.5 - 0.8))), 3)
    p1 = F.when(F.col("id") < 50, 0.0).when(F.col("id") < 100, 1.0).otherwise(p1)
    probs = base.select("label_idx", F.array(1 - p1, p1).alias("probability")).persist()
    y, p = _local(probs)
    scored = _scored(probs)

    # sklearn clips at the float64 machine epsilon; the stage's default is 1e-15
    metrics = counts_metrics(scored, [0, 1], clip_eps=float(np.finfo(np.float64).eps))
    aucs, curves = roc_curves(spark, scored, [0, 1], {1: _totals(metrics, [0, 1])[1]}, curve_points=500)

    assert metrics["rows"] == n
    assert aucs["1"] == pytest.approx(roc_auc_score(y, p[:, 1]), abs=1e-9)
    assert metrics["log_loss"] == pytest.approx(log_loss(y, p), abs=1e-9)
    assert metrics["accuracy"] == pytest.approx(accuracy_score(y, p.argmax(1)), abs=1e-12)
    assert metrics["confusion_matrix"]["matrix"] == confusion_matrix(y, p.argmax(1)).tolist()
    # the kept points are vertices of sklearn's exact curve (as counts: no rounding doubts), spread along it
    positives, negatives = int(y.sum()), int(n - y.sum())
    fpr, tpr, _ = roc_curve(y, p[:, 1], drop_intermediate=False)
    exact = set(zip(np.rint(fpr * negatives), np.rint(tpr * positives), strict=True))
    kept = np.array([curves["1"]["fpr"], curves["1"]["tpr"]]).T
    assert all((round(f * negatives), round(t * positives)) in exact for f, t in kept)
    # about curve_points (500) points and the two ends: measured 501 with 4 shuffle partitions
    assert 490 <= len(kept) <= 510
    assert tuple(kept[0]) == (0.0, 0.0) and tuple(kept[-1]) == (1.0, 1.0)
    # no big jumps: the points follow the whole curve (measured: fpr 0.0042, tpr 0.0062 at most)
    assert np.diff(kept[:, 0]).max() < 0.01 and np.diff(kept[:, 1]).max() < 0.015
    probs.unpersist()


def test_multiclass_one_vs_rest_auc_matches_sklearn(spark) -> None:
    n, k = 30_000, 3
    u = F.rand(5)
    base = spark.range(n, numPartitions=3).withColumn(
        "label_idx", F.when(u < 0.1, 0).when(u < 0.65, 1).otherwise(2).cast("int")
    )
    logits = [F.randn(10 + c) + F.when(F.col("label_idx") == c, 1.0).otherwise(0.0) for c in range(k)]
    norm = sum(F.exp(z) for z in logits)
    # rounded: ties again, and rows that do not sum to exactly 1
    probs = base.select("label_idx", F.array(*[F.round(F.exp(z) / norm, 3) for z in logits]).alias("probability"))
    probs = probs.persist()
    y, p = _local(probs)
    scored = _scored(probs)

    metrics = counts_metrics(scored, [0, 1, 2], clip_eps=1e-15)
    aucs, curves = roc_curves(spark, scored, [0, 1, 2], _totals(metrics, [0, 1, 2]), curve_points=200)

    for c in range(k):
        assert aucs[str(c)] == pytest.approx(roc_auc_score(y == c, p[:, c]), abs=1e-9), c
        # curve_points (200) and the two ends: measured 201 per class; steps spread along the curve
        fpr, tpr = np.array(curves[str(c)]["fpr"]), np.array(curves[str(c)]["tpr"])
        assert 190 <= len(fpr) <= 210, c
        assert np.diff(fpr).max() < 0.05 and np.diff(tpr).max() < 0.06, c  # measured <= 0.015 and 0.032
    # the clipped log loss of the true class, as documented (sklearn would renormalize the rows)
    expected = -np.mean(np.log(np.clip(p[np.arange(n), y], 1e-15, 1 - 1e-15)))
    assert metrics["log_loss"] == pytest.approx(expected, abs=1e-9)
    assert metrics["confusion_matrix"]["matrix"] == confusion_matrix(y, p.argmax(1)).tolist()
    probs.unpersist()


def test_labels_outside_the_classes_fail_the_stage(spark) -> None:
    df = spark.createDataFrame(
        [(0, [0.9, 0.1]), (1, [0.2, 0.8]), (2, [0.5, 0.5])], "label int, probability array<double>"
    )
    scored = df.select(
        label_index(df.schema["label"].dataType, F.col("label"), [0, 1]).alias("label_idx"),
        "probability",
        F.lit(0).alias("pred_idx"),
    )
    with pytest.raises(
        StageFailedError,
        match=r"^evaluate: 1 of 3 rows have a label in 'label' that is not one of the model's classes \[0, 1\]; ",
    ):
        counts_metrics(scored, [0, 1], clip_eps=1e-15)


def test_one_hot_and_fractional_labels(spark) -> None:
    df = spark.createDataFrame(
        [([0.0, 0.0, 1.0], 2.0), ([1.0, 0.0, 0.0], 1.5), ([0.0, 1.0, 0.0], 1.0)], "onehot array<double>, value double"
    )
    rows = df.select(
        label_index(df.schema["onehot"].dataType, F.col("onehot"), [0, 1, 2]).alias("a"),
        label_index(df.schema["value"].dataType, F.col("value"), [0, 1, 2]).alias("b"),
    ).collect()
    assert [(r["a"], r["b"]) for r in rows] == [(2, 2), (0, -1), (1, 1)]


def test_binary_auc_of_a_million_continuous_scores(spark) -> None:
    # with this data in a local[2] session, the former pass (groupBy after the range shuffle) got a
    # hash shuffle of its own: partitions overlapped and the AUC came out 0.650 instead of 0.802, silently
    n = 1_000_000
    base = spark.range(n, numPartitions=4).withColumn("label_idx", (F.rand(1) < 0.3).cast("int"))
    p1 = 1 / (1 + F.exp(-(1.2 * F.col("label_idx") + F.randn(2) - 0.8)))
    probs = base.select("label_idx", F.array(1 - p1, p1).alias("probability")).persist()
    local = probs.select("label_idx", F.col("probability")[1]).toPandas().to_numpy()  # the reference only
    positives = float(local[:, 0].sum())
    aucs, _ = roc_curves(spark, _scored(probs), [0, 1], {1: (positives, n - positives)}, curve_points=100)
    assert aucs["1"] == pytest.approx(roc_auc_score(local[:, 0], local[:, 1]), abs=1e-9)
    probs.unpersist()
