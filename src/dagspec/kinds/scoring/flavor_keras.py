"""Inference flavor ``keras`` (see ``dagspec.kinds.scoring.flavor_base`` for the contract).

Keras 3 models (``.keras`` / ``.h5``) are scored inside Spark tasks through a SCALAR_ITER Arrow
UDF over the model's input columns only. The batches are encoded by
``dagspec.kinds.training.keras_inputs`` - the encoders ``train_keras`` trains with - so a model
sees the same arrays in training and inference.

Card fields read here: ``artifact``, ``classes``, and either ``inputs`` (the input specs
``train_keras`` writes: column, encoding dense | sequence | sparse, per-row shape) or, for models
made elsewhere, ``input_columns`` (default ``[features_col]``) with ``input_shapes`` (column ->
per-row shape: ``[D]`` is a dense vector, ``[L or null, F]`` a sequence zero-padded per batch).
"""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import UserDefinedType

from dagspec.errors import StageFailedError
from dagspec.kinds.scoring.flavor_base import numpy_to_probability, with_prediction
from dagspec.kinds.training.keras_inputs import InputSpec, encode_features

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark import Broadcast

    from dagspec.kinds.model_card import ModelCard
    from dagspec.kinds.scoring.flavor_base import Scoring, Shipped

DEFAULT_BATCH_SIZE = 1024

# One loaded model per Python worker, keyed by the artifact's sha256: Spark reuses workers across
# tasks, so later tasks of the same stage skip the load (importing TensorFlow alone costs seconds).
_MODEL: dict[str, Any] = {}
_LOCK = threading.Lock()


def input_specs(card: ModelCard) -> list[InputSpec]:
    """How each input column is encoded: ``inputs`` from train_keras, else from input_columns/shapes."""
    if card.inputs:
        return [InputSpec.from_json(s) for s in card.inputs]
    columns = card.input_columns or ([card.features_col] if card.features_col else [])
    if not columns:
        raise StageFailedError("model.json: the keras card names no input_columns (nor a features_col)")
    specs = []
    for column in columns:
        shape = card.input_shapes.get(column)
        if not shape or len(shape) not in (1, 2) or shape[-1] is None:
            raise StageFailedError(
                f"model.json: input_shapes[{column!r}] must be [D] (a vector) or [L or null, F] (a sequence), got {shape}"
            )
        specs.append(InputSpec(column, "dense" if len(shape) == 1 else "sequence", tuple(shape)))
    return specs


def transform(scoring: Scoring) -> DataFrame:
    """``keep_cols`` + ``probability`` + ``prediction``; see ``dagspec.kinds.scoring.flavor_base``."""
    from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf

    card, df = scoring.card, scoring.df
    specs = input_specs(card)
    columns = scoring.input_columns([s.column for s in specs])
    rows_per_call = scoring.batch_size or DEFAULT_BATCH_SIZE
    n_classes = len(card.classes)
    suffix = Path(card.artifact).suffix or ".keras"
    blob, digest = scoring.artifact()

    def score(batches: Iterator[Any]) -> Iterator[pa.Array]:
        import numpy as np
        import pyarrow as pa

        model = _load(blob, digest, suffix)
        for batch in batches:
            arrays = batch if isinstance(batch, tuple) else (batch,)
            rows = len(arrays[0])
            if rows == 0:
                yield numpy_to_probability(np.zeros((0, n_classes)), n_classes)
                continue
            parts = []
            for start in range(0, rows, rows_per_call):
                table = pa.table([a.slice(start, rows_per_call) for a in arrays], names=columns)
                parts.append(_predict(model, encode_features(table, specs), columns))
            yield numpy_to_probability(np.concatenate(parts), n_classes)

    with warnings.catch_warnings():  # pyspark prefers type hints; the explicit type is clearer here
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(score, "array<double>", ArrowUDFType.SCALAR_ITER)
    return with_prediction(df, scoring.keep_cols, udf(*[_arrow_column(df, s) for s in specs]), card.classes)


def _arrow_column(df: DataFrame, spec: InputSpec) -> Column:
    """A model input column as Arrow can carry it: Spark ML vectors become arrays or structs."""
    if not isinstance(df.schema[spec.column].dataType, UserDefinedType):
        return F.col(spec.column)
    if spec.encoding == "sparse":
        # the (type, size, indices, values) struct keeps sparse rows sparse. Measured on Spark 4.2:
        # unwrap_udt of a vector read from Parquet fails in the Arrow writer (UNSUPPORTED_DATATYPE)
        return F.unwrap_udt(F.col(spec.column))
    from pyspark.ml.functions import vector_to_array

    # dense inputs are small (e.g. 14 HLF): the JVM densifies them, which Arrow carries as a list
    return vector_to_array(F.col(spec.column))


def _predict(model: Any, encoded: dict[str, np.ndarray], columns: list[str]) -> np.ndarray:
    """Feed the encoded arrays by the model's input names (train_keras names inputs after columns)."""
    names: list[Any] = [getattr(t, "name", None) for t in model.inputs]
    if all(n in encoded for n in names):
        xs = [encoded[n] for n in names]
    elif len(names) == len(encoded):  # inputs named otherwise: model.json lists them in model order
        xs = list(encoded.values())
    else:
        raise StageFailedError(f"the model has inputs {names}; model.json describes {list(encoded)} (from {columns})")
    scores: np.ndarray = model.predict_on_batch(xs[0] if len(xs) == 1 else xs)
    return scores


def _load(blob: Broadcast[bytes] | Shipped, digest: str, suffix: str) -> Any:
    """The model for this artifact, loaded at most once per Python worker."""
    with _LOCK:
        if digest in _MODEL:
            return _MODEL[digest]
        _MODEL.clear()  # a worker serving a new model drops the old one
        _configure_tensorflow()
        import keras

        with tempfile.TemporaryDirectory(prefix="dagspec-model-") as tmp:
            path = Path(tmp) / f"model{suffix}"
            path.write_bytes(blob.value)
            model = keras.saving.load_model(path, compile=False)
        _MODEL[digest] = model
        return model


def _configure_tensorflow() -> None:
    """Quiet TF and give it the task's cores only: Spark already runs one task per core."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from pyspark import TaskContext

    context = TaskContext.get()
    cpus = context.cpus() if context is not None else 1
    try:
        tf.config.threading.set_intra_op_parallelism_threads(cpus)
        tf.config.threading.set_inter_op_parallelism_threads(cpus)
    except RuntimeError:  # TF was initialized earlier in this worker: keep its settings
        pass
