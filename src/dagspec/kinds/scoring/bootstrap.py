"""A seeded, distributed Poisson bootstrap of accuracy and log loss.

Every row gets a Poisson(1) weight per replicate (the multinomial resampling of a bootstrap,
approximated row by row, so no partition needs to know the others); each partition reduces its
rows to the weighted sums of every replicate (one short row of arrays per partition), and the
driver adds them and takes percentiles. The weights are drawn from
``numpy.random.default_rng([seed, partition, batch])``: the same input read the same way gives
the same replicates.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dagspec.kinds.scoring.flavor_base import PROBABILITY
from dagspec.kinds.scoring.intervals import percentile_interval

_SCHEMA = "weight array<double>, correct array<double>, loss array<double>"


def bootstrap_replicates(scored: DataFrame, clip_eps: float, replicates: int, seed: int) -> dict[str, np.ndarray]:
    """Accuracy and log loss of each replicate (arrays of ``replicates`` values).

    ``scored``: ``label_idx``, ``probability`` and ``pred_idx``, every label valid (``counts_metrics``
    checked them).
    """
    true_p = F.element_at(PROBABILITY, F.col("label_idx") + 1)
    clipped = F.least(F.greatest(true_p, F.lit(clip_eps)), F.lit(1.0 - clip_eps))
    rows = scored.select(
        (F.col("label_idx") == F.col("pred_idx")).cast("double").alias("correct"),
        (-F.log(clipped)).alias("loss"),
    )
    sums = rows.mapInPandas(lambda batches: _partition_sums(batches, replicates, seed), _SCHEMA).collect()
    weight = np.zeros(replicates)
    correct = np.zeros(replicates)
    loss = np.zeros(replicates)
    for r in sums:
        weight += np.asarray(r["weight"])
        correct += np.asarray(r["correct"])
        loss += np.asarray(r["loss"])
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"accuracy": correct / weight, "log_loss": loss / weight}


def weighted_sums(correct: np.ndarray, loss: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per replicate (columns of ``weights``): the summed weights, weighted correct rows and losses."""
    return weights.sum(axis=0), correct @ weights, loss @ weights


def _partition_sums(batches: Iterator[pd.DataFrame], replicates: int, seed: int) -> Iterator[pd.DataFrame]:
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    totals = [np.zeros(replicates), np.zeros(replicates), np.zeros(replicates)]
    for number, batch in enumerate(batches):
        rng = np.random.default_rng([seed, partition, number])
        weights = rng.poisson(1.0, size=(len(batch), replicates)).astype(np.float64)
        correct = batch["correct"].to_numpy(dtype=np.float64)
        loss = batch["loss"].to_numpy(dtype=np.float64)
        for total, part in zip(totals, weighted_sums(correct, loss, weights), strict=True):
            total += part
    yield pd.DataFrame({"weight": [totals[0]], "correct": [totals[1]], "loss": [totals[2]]})


def bootstrap_intervals(scored: DataFrame, clip_eps: float, replicates: int, seed: int, level: float) -> dict[str, Any]:
    """``{"accuracy_ci": [low, high], "log_loss_ci": [low, high]}``: percentile intervals."""
    values = bootstrap_replicates(scored, clip_eps, replicates, seed)
    return {f"{name}_ci": percentile_interval(v, level) for name, v in values.items()}
