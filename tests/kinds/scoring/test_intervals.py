"""DeLong's variance and paired test against brute force, interval coverage, numpy only (no Spark)."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from dagspec.kinds.scoring.intervals import (
    PairedSums,
    chain,
    chunk_sums,
    delong,
    mean_interval,
    normal_interval,
    paired_delong,
    percentile_interval,
    placements,
    z_value,
)


def brute_force(labels: np.ndarray, scores: np.ndarray) -> tuple[float, float, np.ndarray]:
    """AUC, DeLong's variance and each row's placement from the m x n comparison matrix."""
    x, y = scores[labels], scores[~labels]
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    variance = v10.var(ddof=1) / len(x) + v01.var(ddof=1) / len(y)
    row_placement = np.empty(len(scores))
    row_placement[labels], row_placement[~labels] = v10, v01
    return float(psi.mean()), float(variance), row_placement


def sorted_counts(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct scores ascending, and the positives and negatives at each (what the Spark pass groups)."""
    distinct, index = np.unique(scores, return_inverse=True)
    pos = np.bincount(index, weights=labels.astype(float), minlength=len(distinct))
    neg = np.bincount(index, weights=(~labels).astype(float), minlength=len(distinct))
    return distinct, pos, neg


def delong_numpy(labels: np.ndarray, scores: np.ndarray, cuts: tuple[int, ...] = ()) -> tuple[float, float]:
    """The production formula on sorted counts split into chunks at ``cuts`` (like partitions)."""
    _, pos, neg = sorted_counts(labels, scores)
    edges = [0, *cuts, len(pos)]
    result = delong(chain(chunk_sums(pos[a:b], neg[a:b]) for a, b in itertools.pairwise(edges)))
    assert result.auc is not None and result.variance is not None
    return result.auc, result.variance


def test_delong_variance_equals_brute_force_with_ties_and_chunks() -> None:
    rng = np.random.default_rng(3)
    labels = rng.random(80) < 0.35
    scores = np.round(rng.normal(size=80) + labels, 1)  # rounded: many ties, within and across classes
    auc, variance, row_placement = brute_force(labels, scores)
    for cuts in [(), (5,), (3, 11, 20)]:
        ours = delong_numpy(labels, scores, cuts)
        assert ours == pytest.approx((auc, variance), rel=1e-12), cuts
    # the per-row placements, from the chunks below a distinct score
    distinct, pos, neg = sorted_counts(labels, scores)
    below = chunk_sums(pos[:7], neg[:7])
    v10, v01 = placements(pos[7:], neg[7:], below, pos.sum(), neg.sum())
    at = np.searchsorted(distinct, scores) - 7
    mine = scores >= distinct[7]
    expected = np.where(labels, v10[np.maximum(at, 0)], v01[np.maximum(at, 0)])
    assert np.allclose(expected[mine], row_placement[mine])


def test_delong_undefined_without_both_classes() -> None:
    assert delong(chunk_sums(np.array([1.0, 2.0]), np.array([0.0, 0.0]))).auc is None
    one_positive = delong(chunk_sums(np.array([0.0, 1.0]), np.array([2.0, 0.0])))
    assert one_positive.auc == 1.0 and one_positive.variance is None
    assert normal_interval(one_positive.auc, one_positive.variance, 0.95) is None


def test_delong_interval_covers_the_true_auc_at_the_nominal_rate() -> None:
    # binormal: positives N(d, 1), negatives N(0, 1): the true AUC is Phi(d / sqrt 2)
    rng = np.random.default_rng(2026)
    d, draws, level = 1.2, 200, 0.95
    truth = NormalDist().cdf(d / math.sqrt(2))
    covered = 0
    for _ in range(draws):
        labels = rng.random(300) < 0.3
        scores = rng.normal(size=300) + d * labels
        auc, variance = delong_numpy(labels, scores)
        interval = normal_interval(auc, variance, level)
        assert interval is not None
        covered += interval[0] <= truth <= interval[1]
    # 95% of 200 = 190, binomial sd 3.1: three sd either side (measured: 183; 95.5% over 1,000 draws)
    assert 181 <= covered <= 199, covered


def test_paired_delong_equals_brute_force_covariance() -> None:
    rng = np.random.default_rng(5)
    labels = rng.random(120) < 0.4
    truth = rng.normal(size=120) + labels
    a = np.round(truth + 0.5 * rng.normal(size=120), 1)
    b = np.round(truth + 1.5 * rng.normal(size=120), 1)
    auc_a, _, pa = brute_force(labels, a)
    auc_b, _, pb = brute_force(labels, b)
    m, n = labels.sum(), (~labels).sum()
    s10 = np.cov(pa[labels], pb[labels])  # 2 x 2, ddof 1
    s01 = np.cov(pa[~labels], pb[~labels])
    variance = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    z = (auc_a - auc_b) / math.sqrt(variance)

    def side(mask: np.ndarray) -> list[float]:
        x, y = pa[mask], pb[mask]
        return [mask.sum(), x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum()]

    p, q = side(labels), side(~labels)
    sums = PairedSums(p[0], q[0], *p[1:], *q[1:])
    test = paired_delong(sums, 0.95)
    assert test["difference"] == pytest.approx(auc_a - auc_b, abs=1e-12)
    assert test["z"] == pytest.approx(z, rel=1e-9)
    assert test["p_value"] == pytest.approx(2 * (1 - NormalDist().cdf(abs(z))), rel=1e-9)
    assert test["significant"] == (test["p_value"] < 0.05)
    half = z_value(0.95) * math.sqrt(variance)
    assert test["difference_ci"] == pytest.approx([auc_a - auc_b - half, auc_a - auc_b + half])
    # a model against itself: no difference, never significant
    same = paired_delong(PairedSums(p[0], q[0], p[1], p[1], p[3], p[3], p[3], q[1], q[1], q[3], q[3], q[3]), 0.95)
    assert same["difference"] == 0.0 and same["significant"] is False


def test_macro_interval_and_percentiles() -> None:
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert mean_interval([[0.7, 0.8], [0.85, 0.95]], [0.75, 0.9]) == pytest.approx([0.775, 0.875])
    assert mean_interval([[0.7, 0.8], None], [0.75, 0.9]) is None
    values = np.concatenate([np.arange(1000) / 1000, [np.nan]])
    assert percentile_interval(values, 0.9) == pytest.approx([0.04995, 0.94905])
