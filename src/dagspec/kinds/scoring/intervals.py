"""Confidence intervals of the metrics: DeLong's ROC AUC variance, paired DeLong tests, percentiles.

Pure Python and numpy, no Spark: the distributed passes in ``metrics``, ``placements`` and
``bootstrap`` reduce the data to the small sums below, and the tests call the same functions on
whole arrays to compare the Spark path with a brute-force computation.

DeLong (1988): with ``m`` positives and ``n`` negatives, the placement of a positive is
``V10 = (#negatives below + #negatives tied / 2) / n`` and of a negative ``V01 = (#positives above
+ #positives tied / 2) / m``; the AUC is the mean of either, and its variance is
``var(V10) / m + var(V01) / n`` (sample variances). Over scores sorted ascending, a chunk of
distinct scores is summarized by ``PlacementSums`` (counts, and the first two moments of the
placements counted from the chunk's start); chunks chain in score order (``chain``), so each
partition of a range-partitioned sort reports one and the driver adds them up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PlacementSums:
    """A chunk of distinct scores (ascending): counts and placement moments counted from its start.

    ``pos_l`` = sum over positives of (negatives below in the chunk + tied / 2), ``pos_l2`` its
    squares; ``neg_q`` = sum over negatives of (positives below in the chunk + tied / 2), ``neg_q2``
    its squares.
    """

    pos: float = 0.0
    neg: float = 0.0
    pos_l: float = 0.0
    pos_l2: float = 0.0
    neg_q: float = 0.0
    neg_q2: float = 0.0

    def then(self, after: PlacementSums) -> PlacementSums:
        """This chunk followed by ``after`` (all of whose scores are higher)."""
        return PlacementSums(
            pos=self.pos + after.pos,
            neg=self.neg + after.neg,
            pos_l=self.pos_l + after.pos_l + self.neg * after.pos,
            pos_l2=self.pos_l2 + after.pos_l2 + 2 * self.neg * after.pos_l + self.neg**2 * after.pos,
            neg_q=self.neg_q + after.neg_q + self.pos * after.neg,
            neg_q2=self.neg_q2 + after.neg_q2 + 2 * self.pos * after.neg_q + self.pos**2 * after.neg,
        )


def chunk_sums(pos: np.ndarray, neg: np.ndarray) -> PlacementSums:
    """``PlacementSums`` of distinct scores in ascending order, given positives and negatives at each."""
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    below_neg = np.cumsum(neg) - neg + 0.5 * neg
    below_pos = np.cumsum(pos) - pos + 0.5 * pos
    return PlacementSums(
        pos=float(pos.sum()),
        neg=float(neg.sum()),
        pos_l=float(np.dot(pos, below_neg)),
        pos_l2=float(np.dot(pos, below_neg**2)),
        neg_q=float(np.dot(neg, below_pos)),
        neg_q2=float(np.dot(neg, below_pos**2)),
    )


def chain(chunks: Iterable[PlacementSums]) -> PlacementSums:
    """The sums of consecutive chunks, given in ascending score order."""
    total = PlacementSums()
    for chunk in chunks:
        total = total.then(chunk)
    return total


@dataclass(frozen=True)
class AucVariance:
    """The AUC, DeLong's variance and its two components (None when a class has < 2 rows)."""

    auc: float | None
    variance: float | None
    s10: float | None = None  # sample variance of the positives' placements
    s01: float | None = None  # of the negatives'


def delong(total: PlacementSums) -> AucVariance:
    """AUC and DeLong's variance from the sums of all scores of one class."""
    m, n = total.pos, total.neg
    if m == 0 or n == 0:
        return AucVariance(None, None)
    auc = total.pos_l / (m * n)
    if m < 2 or n < 2:
        return AucVariance(auc, None)
    # placements as fractions: V10 = pos_l-terms / n; V01 = (m - Q) / m
    sum_v10_sq = total.pos_l2 / n**2
    sum_v01_sq = (m * m * n - 2 * m * total.neg_q + total.neg_q2) / m**2
    s10 = max(0.0, (sum_v10_sq - m * auc * auc) / (m - 1))
    s01 = max(0.0, (sum_v01_sq - n * auc * auc) / (n - 1))
    return AucVariance(auc, s10 / m + s01 / n, s10, s01)


def placements(
    pos: np.ndarray, neg: np.ndarray, before: PlacementSums, m: float, n: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct score (ascending, after the chunks summed in ``before``): V10 and V01."""
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    neg_below = before.neg + np.cumsum(neg) - neg + 0.5 * neg
    pos_below = before.pos + np.cumsum(pos) - pos + 0.5 * pos
    v10 = neg_below / n if n else np.full_like(pos, np.nan)
    v01 = (m - pos_below) / m if m else np.full_like(pos, np.nan)
    return v10, v01


def z_value(level: float) -> float:
    """The two-sided standard normal quantile of a confidence level (1.96 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + level / 2)


def normal_interval(value: float | None, variance: float | None, level: float) -> list[float] | None:
    """``[low, high]``: value -/+ z * sqrt(variance), clipped to [0, 1] (None when undefined)."""
    if value is None or variance is None:
        return None
    half = z_value(level) * math.sqrt(variance)
    return [max(0.0, value - half), min(1.0, value + half)]


def mean_interval(intervals: Sequence[list[float] | None], values: Sequence[float | None]) -> list[float] | None:
    """A conservative interval of the mean of several AUCs: the mean of their half-widths.

    The standard deviation of a mean is at most the mean of the standard deviations (whatever the
    correlation of the classes), so the interval is at least as wide as the exact one.
    """
    pairs = [(v, i) for v, i in zip(values, intervals, strict=True) if v is not None]
    if not pairs or any(i is None for _, i in pairs):
        return None
    mean = sum(v for v, _ in pairs) / len(pairs)
    half = sum((i[1] - i[0]) / 2 for _, i in pairs if i is not None) / len(pairs)
    return [max(0.0, mean - half), min(1.0, mean + half)]


@dataclass(frozen=True)
class PairedSums:
    """Sums over the rows two models share, of one class: counts and placement moments of both."""

    pos: float
    neg: float
    pos_a: float
    pos_b: float
    pos_aa: float
    pos_bb: float
    pos_ab: float
    neg_a: float
    neg_b: float
    neg_aa: float
    neg_bb: float
    neg_ab: float


def _covariance(n: float, sum_x: float, sum_y: float, sum_xy: float) -> float:
    return (sum_xy - sum_x * sum_y / n) / (n - 1)


def paired_delong(sums: PairedSums, level: float) -> dict[str, Any]:
    """DeLong's test of AUC(a) = AUC(b) on the same rows: difference, its interval, z, p, significant."""
    m, n = sums.pos, sums.neg
    if m < 2 or n < 2:
        return {"difference": None, "difference_ci": None, "z": None, "p_value": None, "significant": None}
    auc_a, auc_b = sums.pos_a / m, sums.pos_b / m
    s10 = (
        _covariance(m, sums.pos_a, sums.pos_a, sums.pos_aa)
        + _covariance(m, sums.pos_b, sums.pos_b, sums.pos_bb)
        - 2 * _covariance(m, sums.pos_a, sums.pos_b, sums.pos_ab)
    )
    s01 = (
        _covariance(n, sums.neg_a, sums.neg_a, sums.neg_aa)
        + _covariance(n, sums.neg_b, sums.neg_b, sums.neg_bb)
        - 2 * _covariance(n, sums.neg_a, sums.neg_b, sums.neg_ab)
    )
    variance = max(0.0, s10 / m + s01 / n)
    difference = auc_a - auc_b
    if variance == 0.0:
        same = difference == 0.0
        return {
            "difference": difference,
            "difference_ci": [difference, difference],
            "z": None,
            "p_value": 1.0 if same else 0.0,
            "significant": not same,
        }
    z = difference / math.sqrt(variance)
    p_value = 2 * (1 - NormalDist().cdf(abs(z)))
    half = z_value(level) * math.sqrt(variance)
    return {
        "difference": difference,
        "difference_ci": [difference - half, difference + half],
        "z": z,
        "p_value": p_value,
        "significant": p_value < 1 - level,
    }


def percentile_interval(replicates: np.ndarray, level: float) -> list[float] | None:
    """The bootstrap percentile interval of replicate values (NaN replicates are dropped)."""
    finite = replicates[np.isfinite(replicates)]
    if len(finite) == 0:
        return None
    low, high = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return [float(low), float(high)]
