"""Load any saved model and apply it to a DataFrame: the one entry point of predict and evaluate.

A helper of the scoring kinds, imported inside their functions (it imports pyspark).

The flavor contract
-------------------
A training kind writes a files output ``model`` holding its artifact and ``model.json``
(``docs/architecture.md``, "Models"). ``transform_with_model`` reads ``model.json``, imports
``dagspec.kinds.scoring.flavor_<flavor>`` and calls its

``def transform(spark, model_dir, meta, df, keep_cols) -> DataFrame``

- ``model_dir``: the model directory as the driver sees it (a local path or a ``file://`` URI;
  use ``local_path``). Executors may not see it: ship what they need (``broadcast_artifact``).
- ``meta``: the validated ``model.json`` (``dagspec.kinds.model_card.ModelCard``) as a dict. The caller may add ``meta["batch_size"]``: rows per
  model call (``None`` or absent: the flavor's default).
- ``df``: the data; ``keep_cols``: its columns to carry over unchanged (may be empty; never
  contains ``probability`` or ``prediction``).
- Returns exactly ``keep_cols`` (same order, same types) + ``probability`` (array<double>, one
  entry per class in ``meta["classes"]`` order; binary: ``[p0, p1]``) + ``prediction`` (int, the
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
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, IntegerType

from dagspec import storage
from dagspec.errors import StageFailedError
from dagspec.kinds.base import is_connect
from dagspec.kinds.model_card import MODEL_CARD, read_model_card

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark import Broadcast

MODEL_META = MODEL_CARD
PROBABILITY = "probability"
PREDICTION = "prediction"


def local_path(model_dir: str) -> Path:
    """A model directory as a local path (files outputs live on local or ``file://`` storage)."""
    return Path(storage.local_path(model_dir))


def read_model_meta(model_dir: str) -> dict[str, Any]:
    """``model.json`` of a model directory, validated as a ``ModelCard``, as the dict the flavors read."""
    return read_model_card(local_path(model_dir), shown_as=model_dir).meta()


def transform_with_model(
    spark: SparkSession,
    model_dir: str,
    df: DataFrame,
    keep_cols: Sequence[str],
    *,
    batch_size: int | None = None,
    min_rows_per_task: int | None = None,
) -> DataFrame:
    """``keep_cols`` + ``probability`` + ``prediction`` for every row of ``df`` (lazy).

    ``min_rows_per_task``: fewer tasks for a small ``df`` (see ``coalesce_small``).
    """
    meta = read_model_meta(model_dir)
    keep = list(dict.fromkeys(keep_cols))
    clashes = [c for c in keep if c in (PROBABILITY, PREDICTION)]
    if clashes:
        raise StageFailedError(f"cannot keep columns named {clashes}: the model writes them")
    missing = [c for c in keep if c not in df.columns]
    if missing:
        raise StageFailedError(f"columns {missing} are not in the data; columns: {', '.join(df.columns)}")
    if batch_size is not None:
        meta = {**meta, "batch_size": batch_size}
    if min_rows_per_task is not None:
        df = coalesce_small(df, min_rows_per_task)
    module = importlib.import_module(f"dagspec.kinds.scoring.flavor_{meta['flavor']}")
    result: DataFrame = module.transform(spark, model_dir, meta, df, keep)
    _check_contract(meta["flavor"], result, df, keep, len(meta["classes"]))
    return result


def coalesce_small(df: DataFrame, min_rows_per_task: int) -> DataFrame:
    """``df`` in fewer partitions when it has fewer than ``min_rows_per_task`` rows per partition.

    Every inference task starts a Python worker that imports the model's library and loads the
    model (TensorFlow: seconds of CPU each). For a test set of a few hundred rows spread over the
    files of a Parquet checkpoint that start-up is the whole cost, so small inputs are scored by
    fewer tasks. Costs one ``count`` (Parquet answers it from the footers).
    """
    rows = df.count()
    return df.coalesce(max(1, -(-rows // min_rows_per_task)))  # coalesce never adds partitions


def _check_contract(flavor: str, result: DataFrame, df: DataFrame, keep: list[str], n_classes: int) -> None:
    expected = [*keep, PROBABILITY, PREDICTION]
    if result.columns != expected:
        raise StageFailedError(f"flavor {flavor!r} returned columns {result.columns}, expected {expected}")
    fields = {f.name: f.dataType for f in result.schema.fields}
    if fields[PROBABILITY] != ArrayType(DoubleType(), True) and fields[PROBABILITY] != ArrayType(DoubleType(), False):
        raise StageFailedError(f"flavor {flavor!r}: probability is {fields[PROBABILITY].simpleString()}")
    if fields[PREDICTION] != IntegerType():
        raise StageFailedError(f"flavor {flavor!r}: prediction is {fields[PREDICTION].simpleString()}, not int")
    changed = [c for c in keep if fields[c] != df.schema[c].dataType]
    if changed:
        raise StageFailedError(f"flavor {flavor!r} changed the types of kept columns {changed}")


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
class Shipped:
    """Bytes that travel inside a Spark Connect plan (no broadcasts there); ``.value`` as a broadcast's."""

    value: bytes


def broadcast_artifact(
    spark: SparkSession, model_dir: str, meta: dict[str, Any]
) -> tuple[Broadcast[bytes] | Shipped, str]:
    """The artifact file's bytes as a broadcast, and their sha256 (a key for per-worker caches).

    Broadcasting keeps executors independent of where the checkpoint lives (a cluster's workers
    may not mount the driver's storage) and ships the file once per executor, not per task. A
    Spark Connect client has no broadcasts: the bytes ride in the pickled function instead.
    """
    path = local_path(model_dir) / meta["artifact"]
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
