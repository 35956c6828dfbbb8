"""The seed's per-event particle preparation, vectorized over a flat (particles x features) array.

The seed (SparkDLTrigger) runs, per event, in a Python UDF::

    particles.sort(key=lambda p: DeltaR(p[5], p[6], lepton[5], lepton[6]), reverse=True)
    return StandardScaler().fit_transform(particles).tolist()

Here every event of an Arrow batch is done at once: one stable lexsort by (event, -DeltaR) and
per-event sums for the mean and variance, with sklearn's formulas (corrected two-pass variance,
near-constant features scaled by 1). The sums are a sparse (events x particles) indicator matrix
times the (particles x 19) values: measured 10x faster than ``np.add.reduceat(axis=0)``, whose
inner loop strides across the 19 columns.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse

ETA, PHI = 5, 6
_EPS = np.finfo(np.float64).eps


def wrap_phi(dphi: np.ndarray) -> np.ndarray:
    """Wrap into [-pi, pi] by repeated +-2pi steps (the same float operations as the seed's loop)."""
    dphi = np.array(dphi, dtype=np.float64, copy=True)
    while True:
        high = dphi > math.pi
        low = dphi < -math.pi
        if not (high.any() or low.any()):
            return dphi
        dphi[high] -= 2 * math.pi
        dphi[low] += 2 * math.pi


def delta_r_to_first(offsets: np.ndarray, x: np.ndarray) -> np.ndarray:
    """DeltaR of every particle to its event's particle 0 (eta, phi at columns 5, 6)."""
    counts = np.diff(offsets)
    starts = offsets[:-1][counts > 0]
    owner = np.repeat(starts, counts[counts > 0])
    deta = x[:, ETA] - x[owner, ETA]
    dphi = wrap_phi(x[:, PHI] - x[owner, PHI])
    distance: np.ndarray = np.sqrt(deta**2 + dphi**2)
    return distance


def _order_within_events(offsets: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Indices that stably sort ``key`` ascending inside each event; events stay in place.

    One (events x longest event) table sorted row by row: short rows sort in cache, about 4x
    faster than one lexsort over the batch. Padding is +inf, which sorts after every real key
    (NaN, as in lexsort, sorts last and is kept); a batch whose longest event is far above the
    mean would pad too much and takes the lexsort.
    """
    counts = np.diff(offsets)
    starts = offsets[:-1]
    width = int(counts.max(initial=0))
    event = np.repeat(np.arange(len(counts)), counts)
    if width == 0 or len(counts) * width > 4 * len(key):
        return np.lexsort((key, event))
    table = np.full((len(counts), width), np.inf)
    table[event, np.arange(len(key)) - np.repeat(starts, counts)] = key
    order = np.argsort(table, axis=1, kind="stable")
    order += starts[:, None]
    return order[order < offsets[1:, None]]


def sort_by_delta_r(offsets: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Particles of each event in decreasing DeltaR from particle 0; ties keep their input order."""
    order = _order_within_events(offsets, -delta_r_to_first(offsets, x))
    return np.take(x, order, axis=0)  # half the time of x[order] for (n, 19) rows


def standardize_per_event(offsets: np.ndarray, x: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """sklearn ``StandardScaler().fit_transform`` applied to each event's particles separately.

    ``in_place`` reuses ``x`` for the result: a batch is tens of MB, and every full-size
    temporary saved is a pass over memory saved.
    """
    out = x if in_place else x.astype(np.float64, copy=True)
    rows = len(out)
    if rows == 0:
        return out
    counts = np.diff(offsets)
    segments = scipy.sparse.csr_matrix((np.ones(rows), np.arange(rows), offsets), shape=(len(counts), rows))
    n = np.maximum(counts, 1).astype(np.float64)[:, None]  # an empty event has no rows to scale
    mean = (segments @ out) / n
    expanded = np.repeat(mean, counts, axis=0)
    out -= expanded
    correction = segments @ out
    squares = np.square(out, out=expanded)  # reuses memory already paged in
    var = (segments @ squares - correction**2 / n) / n
    # sklearn's _is_constant_feature: below the two-pass error bound the feature is constant
    constant = var <= n * _EPS * var + (n * mean * _EPS) ** 2
    scale = np.where(constant, 1.0, np.sqrt(np.where(constant, 1.0, var)))
    out /= np.repeat(scale, counts, axis=0)
    return out


def fix_length(
    offsets: np.ndarray, x: np.ndarray, max_particles: int, keep: str = "nearest"
) -> tuple[np.ndarray, np.ndarray]:
    """Every event to exactly ``max_particles`` rows: zero rows appended, or the surplus dropped.

    Rows are in decreasing DeltaR, so ``keep="nearest"`` keeps the tail (closest to the lepton,
    the lepton itself last) and ``"farthest"`` keeps the head.
    """
    counts = np.diff(offsets)
    events = len(counts)
    kept = np.minimum(counts, max_particles)
    first = offsets[:-1] + (counts - kept if keep == "nearest" else 0)
    event = np.repeat(np.arange(events), kept)
    position = np.arange(kept.sum()) - np.repeat(np.cumsum(kept) - kept, kept)
    out = np.zeros((events * max_particles, x.shape[1]), dtype=np.float64)
    out[event * max_particles + position] = x[np.repeat(first, kept) + position]
    return np.arange(0, events * max_particles + 1, max_particles, dtype=np.int64), out


def prepare_particles(
    offsets: np.ndarray, x: np.ndarray, max_particles: int | None = None, keep: str = "nearest"
) -> tuple[np.ndarray, np.ndarray]:
    """Sort by DeltaR, standardize per event, then optionally fix the length."""
    standardized = standardize_per_event(offsets, sort_by_delta_r(offsets, x), in_place=True)
    if max_particles is None:
        return offsets, standardized
    return fix_length(offsets, standardized, max_particles, keep)


def min_max_scale(x: np.ndarray, minimum: np.ndarray, maximum: np.ndarray) -> np.ndarray:
    """Spark ML MinMaxScaler to [0, 1]: (x - min) / (max - min); a constant column gives 0.5."""
    span = maximum - minimum
    constant = span == 0
    scaled = (x - minimum) / np.where(constant, 1.0, span)
    return np.where(constant, 0.5, scaled)


def one_hot(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """One-hot rows of length ``num_classes`` (Spark's OneHotEncoder with dropLast=False)."""
    out = np.zeros((len(labels), num_classes), dtype=np.float64)
    out[np.arange(len(labels)), labels.astype(np.int64)] = 1.0
    return out
