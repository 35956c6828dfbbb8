"""The Spark paths of the intervals against the numpy brute force: DeLong, placements, paired test, bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

from dagspec.kinds.scoring.bootstrap import bootstrap_intervals, bootstrap_replicates, weighted_sums
from dagspec.kinds.scoring.intervals import paired_delong
from dagspec.kinds.scoring.metrics import counts_metrics, roc_pass
from dagspec.kinds.scoring.placements import paired_sums, write_placements
from tests.kinds.scoring.test_intervals import brute_force

pytestmark = pytest.mark.spark


def _frame(spark, rows: int, seed: int):
    """key, label_idx in {0, 1}, two models' rounded scores (ties) as probability arrays; and numpy copies."""
    rng = np.random.default_rng(seed)
    labels = rng.random(rows) < 0.3
    truth = rng.normal(size=rows) + labels
    scores = {"a": np.round(truth + 0.6 * rng.normal(size=rows), 1), "b": np.round(truth + rng.normal(size=rows), 1)}
    p = {name: 1 / (1 + np.exp(-s)) for name, s in scores.items()}
    data = [
        (i, int(labels[i]), [1 - float(p["a"][i]), float(p["a"][i])], [1 - float(p["b"][i]), float(p["b"][i])])
        for i in range(rows)
    ]
    df = spark.createDataFrame(data, "key long, label_idx int, a array<double>, b array<double>").repartition(3)
    return df, labels, p


def _scored(df, column: str):
    position = F.array_position(column, F.array_max(column)) - 1
    return df.select("key", "label_idx", F.col(column).alias("probability"), position.cast("int").alias("pred_idx"))


def test_spark_delong_variance_placements_and_paired_test_equal_brute_force(spark, tmp_path) -> None:
    df, labels, p = _frame(spark, 2000, 8)
    results = {}
    for name in ("a", "b"):
        scored = _scored(df, name)
        m = float(labels.sum())
        roc = roc_pass(spark, scored, [0, 1], {1: (m, len(labels) - m)}, curve_points=50, keep=["key"])
        write_placements(roc, "key", str(tmp_path / name))
        roc.distinct.unpersist()
        auc, variance, row_placement = brute_force(labels, p[name])
        assert roc.aucs["1"] == pytest.approx(auc, abs=1e-12)
        assert roc.variances["1"].variance == pytest.approx(variance, rel=1e-9)
        written = spark.read.parquet(str(tmp_path / name)).orderBy("key").collect()  # the test's reference only
        assert [r["key"] for r in written] == list(range(len(labels)))
        assert np.allclose([r["placement"] for r in written], row_placement, atol=1e-12)
        assert [r["positive"] for r in written] == labels.tolist()
        results[name] = row_placement

    sums, matched, disagreeing = paired_sums(spark, str(tmp_path / "a"), str(tmp_path / "b"))
    assert (matched, disagreeing) == (len(labels), 0)
    a, b = results["a"], results["b"]
    m, n = labels.sum(), (~labels).sum()
    s10, s01 = np.cov(a[labels], b[labels]), np.cov(a[~labels], b[~labels])
    variance = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    test = paired_delong(sums[1], 0.95)
    difference = a[labels].mean() - b[labels].mean()
    assert test["difference"] == pytest.approx(difference, abs=1e-12)
    assert test["z"] == pytest.approx(difference / np.sqrt(variance), rel=1e-9)
    # model a sees the truth with less noise: its AUC is higher, significantly at 2000 rows (measured: +0.026,
    # p = 0.023)
    assert test["difference"] > 0.02 and test["significant"] and test["p_value"] < 0.05


def test_multiclass_delong_variance_per_class(spark) -> None:
    rng = np.random.default_rng(4)
    rows = 900
    labels = rng.integers(0, 3, size=rows)
    logits = rng.normal(size=(rows, 3)) + np.eye(3)[labels]
    probs = np.round(np.exp(logits) / np.exp(logits).sum(1, keepdims=True), 2)
    df = spark.createDataFrame(
        [(int(labels[i]), probs[i].tolist()) for i in range(rows)], "label_idx int, probability array<double>"
    ).repartition(3)
    scored = df.withColumn("pred_idx", (F.array_position("probability", F.array_max("probability")) - 1).cast("int"))
    totals = {k: (float((labels == k).sum()), float((labels != k).sum())) for k in range(3)}
    roc = roc_pass(spark, scored, [0, 1, 2], totals, curve_points=50)
    for k in range(3):
        auc, variance, _ = brute_force(labels == k, probs[:, k])
        assert roc.aucs[str(k)] == pytest.approx(auc, abs=1e-12), k
        assert roc.variances[str(k)].variance == pytest.approx(variance, rel=1e-9), k


def test_bootstrap_is_deterministic_for_a_seed_and_centred_on_the_metrics(spark) -> None:
    df, labels, p = _frame(spark, 3000, 9)
    scored = _scored(df, "a").persist()
    first = bootstrap_replicates(scored, 1e-15, 100, seed=7)
    again = bootstrap_replicates(scored, 1e-15, 100, seed=7)
    other = bootstrap_replicates(scored, 1e-15, 100, seed=8)
    assert np.array_equal(first["accuracy"], again["accuracy"]) and np.array_equal(first["log_loss"], again["log_loss"])
    assert not np.array_equal(first["log_loss"], other["log_loss"])
    exact = counts_metrics(scored, [0, 1], clip_eps=1e-15)
    intervals = bootstrap_intervals(scored, 1e-15, 100, seed=7, level=0.95)
    for name in ("accuracy", "log_loss"):
        low, high = intervals[f"{name}_ci"]
        assert low < exact[name] < high, name
        # the spread of a mean of 3000 rows: sd / sqrt(n), about a third of which each side of a 95% interval
        assert first[name].std() == pytest.approx(np.std(_row_values(labels, p["a"])[name]) / np.sqrt(3000), rel=0.3)
    scored.unpersist()
    # the weighted sums are plain matrix products of the weights
    weights = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]])
    total, correct, loss = weighted_sums(np.array([1.0, 0.0, 1.0]), np.array([0.1, 0.2, 0.3]), weights)
    assert total.tolist() == [3.0, 4.0] and correct.tolist() == [1.0, 3.0] and loss == pytest.approx([0.5, 1.1])


def _row_values(labels: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "accuracy": ((p > 0.5) == labels).astype(float),
        "log_loss": -np.log(np.where(labels, p, 1 - p)),
    }
