"""What every inference flavor shares: the contract, the output columns and the shipping helpers.

A flavor is a module listed in ``dagspec.kinds.scoring.flavors`` (the registry); this module is
below the flavors and the registry, so a flavor imports only this and what it needs itself.

The flavor contract
-------------------
A training kind writes a files output ``model`` holding its artifact and ``model.json``
(``docs/architecture.md``, "Models"). ``models.transform_with_model`` reads ``model.json``, looks
its ``flavor`` up in the registry and calls that module's

``def transform(scoring: Scoring) -> DataFrame``

with a ``Scoring`` holding ``spark``, ``model_dir``, ``card``, ``df``, ``keep_cols`` and ``batch_size``:

- ``model_dir``: the model directory as the driver sees it (a local path or a ``file://`` URI;
  use ``local_path``). Executors may not see it: ship what they need (``Scoring.artifact``).
- ``card``: the validated ``model.json``, a ``dagspec.kinds.model_card.ModelCard`` (read its
  fields; xgboost's feature layout is ``card.features()``).
- ``df``: the data; ``keep_cols``: its columns to carry over unchanged (may be empty; never
  contains ``probability`` or ``prediction``); ``batch_size``: rows per model call (``None``: the
  flavor's default). ``Scoring.input_columns`` checks that the data has the columns the model reads.
- Returns exactly ``keep_cols`` (same order, same types) + ``probability`` (array<double>, one
  entry per class in ``card.classes`` order; binary: ``[p0, p1]``) + ``prediction`` (int, the
  class value with the highest probability, the first on ties). ``with_prediction`` builds the
  last two columns from a probability column, so every flavor agrees on ties.
- Lazy and linear: no action (no ``count``/``collect``), one output row per input row. The model
  is loaded at most once per Spark task (cache it per Python worker), rows are scored in batches,
  and only the columns the model reads cross to Python (a ``SCALAR_ITER`` Arrow UDF over the
  input columns: the ``keep_cols`` stay in the JVM).
- Import tensorflow, xgboost, ... inside the function (and inside the executor closure), never at
  module level; never import airflow.

``transform_with_model`` checks the returned schema, so a flavor that breaks the contract fails
with a clear message instead of producing wrong metrics downstream.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dagspec import storage
from dagspec.errors import StageFailedError
from dagspec.kinds.base import is_connect

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark import Broadcast

    from dagspec.kinds.model_card import ModelCard

PROBABILITY = "probability"
PREDICTION = "prediction"


def local_path(model_dir: str) -> Path:
    """A model directory as a local path (files outputs live on local or ``file://`` storage)."""
    return Path(storage.local_path(model_dir))


def with_prediction(df: DataFrame, keep_cols: Sequence[str], probability: Column, classes: Sequence[int]) -> DataFrame:
    """Select ``keep_cols``, ``probability`` and ``prediction`` = the class of the first maximum.

    The argmax runs in the JVM over the probability column, so a Python UDF is evaluated once.
    """
    with_prob = df.select(*keep_cols, probability.cast("array<double>").alias(PROBABILITY))
    return with_prob.withColumn(PREDICTION, argmax_class(F.col(PROBABILITY), classes))


def argmax_class(probability: Column, classes: Sequence[int]) -> Column:
    """The class value at the (first) largest probability, as an int."""
    position = F.array_position(probability, F.array_max(probability)).cast("int")
    return F.element_at(F.array(*[F.lit(int(c)) for c in classes]), position).cast("int")


@dataclass(frozen=True)
class Scoring:
    """What a flavor's ``transform`` scores: a model (its directory and card) and the data."""

    spark: SparkSession
    model_dir: str
    card: ModelCard
    df: DataFrame
    keep_cols: list[str]
    batch_size: int | None = None  # rows per model call; None: the flavor's default

    def input_columns(self, columns: Sequence[str]) -> list[str]:
        """``columns``, the ones the model reads, once the data is known to have each of them."""
        missing = [c for c in columns if c not in self.df.columns]
        if missing:
            raise StageFailedError(
                f"the {self.card.flavor} model reads columns {missing} that the data lacks; columns: {self.df.columns}"
            )
        return list(columns)

    def artifact(self) -> tuple[Broadcast[bytes] | Shipped, str]:
        """The model's artifact shipped to the executors, and its digest (``broadcast_artifact``)."""
        return broadcast_artifact(self.spark, self.model_dir, self.card)


@dataclass(frozen=True)
class Shipped:
    """Bytes that travel inside a Spark Connect plan (no broadcasts there); ``.value`` as a broadcast's."""

    value: bytes


def broadcast_artifact(spark: SparkSession, model_dir: str, card: ModelCard) -> tuple[Broadcast[bytes] | Shipped, str]:
    """The artifact file's bytes as a broadcast, and their sha256 (a key for per-worker caches).

    Broadcasting keeps executors independent of where the checkpoint lives (a cluster's workers
    may not mount the driver's storage) and ships the file once per executor, not per task. A
    Spark Connect client has no broadcasts: the bytes ride in the pickled function instead.
    """
    path = local_path(model_dir) / card.artifact
    if not path.is_file():
        raise StageFailedError(f"model artifact {path} is missing or not a file")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if is_connect(spark):
        return Shipped(data), digest
    return spark.sparkContext.broadcast(data), digest


def numpy_to_probability(probabilities: np.ndarray, n_classes: int) -> pa.Array:
    """A model's ``(rows, k)`` output as an Arrow ``list<double>`` column; ``(rows, 1)`` binary -> [1-p, p]."""
    import numpy as np
    import pyarrow as pa

    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim == 1 or (p.ndim == 2 and p.shape[1] == 1 and n_classes == 2):
        p1 = p.reshape(-1)
        p = np.stack([1.0 - p1, p1], axis=1)
    if p.ndim != 2 or p.shape[1] != n_classes:
        raise StageFailedError(f"the model outputs shape {p.shape}, expected (rows, {n_classes})")
    offsets = np.arange(0, p.size + 1, n_classes, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(p.reshape(-1)))
