"""Inference flavor ``xgboost`` (see ``dagspec.kinds.scoring.flavor_base`` for the contract).

The booster travels as a broadcast of its JSON bytes and is loaded at most once per Python worker.
Rows are scored with ``mapInArrow`` over a projection holding only the kept columns and the
model's inputs: the vector column unwrapped to its (type, size, indices, values) struct, rebuilt
as the same CSR matrix as in training, or the numeric columns (NaN for nulls). An Arrow UDF would
keep the kept columns in the JVM, but Spark 4.2 refuses to feed it a Spark ML vector's fields
("Unsupported data type UDT"), so the projection is the narrow part instead.
``with_prediction`` derives ``prediction`` in the JVM, so ties resolve as for every flavor.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dagspec.kinds.scoring.flavor_base import numpy_to_probability, with_prediction

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Broadcast
    from pyspark.sql import DataFrame

    from dagspec.kinds.scoring.flavor_base import Scoring, Shipped

_LOCK = threading.Lock()
_BOOSTER: dict[str, Any] = {}
_PROBABILITY = "__probability"


def transform(scoring: Scoring) -> DataFrame:
    """``keep_cols`` + ``probability`` ([P(0), P(1)]) + ``prediction`` (batches: Spark's Arrow batch size)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import ArrayType, DoubleType, StructField, StructType

    df, keep_cols = scoring.df, scoring.keep_cols
    features = scoring.card.features()
    columns = scoring.input_columns(features.input_columns)
    features_col = features.features_col
    n_features = features.num_features
    missing_value = features.missing
    blob, digest = scoring.artifact()
    kept = [f"__k{i}" for i in range(len(keep_cols))]
    inputs = [f"__x{i}" for i in range(len(columns))]
    projected = df.select(
        *[F.col(c).alias(k) for c, k in zip(keep_cols, kept, strict=True)],
        *[(F.unwrap_udt(c) if c == features_col else F.col(c)).alias(x) for c, x in zip(columns, inputs, strict=True)],
    )
    schema = StructType(
        [
            *[StructField(k, df.schema[c].dataType, True) for c, k in zip(keep_cols, kept, strict=True)],
            StructField(_PROBABILITY, ArrayType(DoubleType(), False), False),
        ]
    )
    arrow_schema = to_arrow_schema(schema)

    def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import xgboost as xgb

        from dagspec.kinds.training.xgboost_data import csr_from_vectors, dense_from_columns

        booster = _load(blob, digest)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if features_col:
                matrix = csr_from_vectors(batch.column(inputs[0]), n_features)
            else:
                matrix = dense_from_columns(batch, inputs)
            # a booster trained on named columns (SparkXGB with features_cols) checks the names
            named = booster.feature_names is not None and len(booster.feature_names) == matrix.shape[1]
            dmatrix = xgb.DMatrix(
                matrix,
                missing=missing_value,
                feature_names=booster.feature_names if named else None,
                feature_types=booster.feature_types if named else None,
            )
            probability = numpy_to_probability(booster.predict(dmatrix), 2)
            arrays = [batch.column(k) for k in kept] + [probability]
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

    scored = projected.mapInArrow(score, schema).select(
        *[F.col(k).alias(c) for c, k in zip(keep_cols, kept, strict=True)], _PROBABILITY
    )
    return with_prediction(scored, keep_cols, F.col(_PROBABILITY), scoring.card.classes)


def _load(blob: Broadcast[bytes] | Shipped, digest: str) -> Any:
    """The booster for this artifact, loaded at most once per Python worker."""
    import xgboost as xgb

    with _LOCK:
        if digest not in _BOOSTER:
            _BOOSTER.clear()
            booster = xgb.Booster()
            booster.load_model(bytearray(blob.value))
            booster.set_param({"nthread": 1})  # Spark already runs one task per core
            _BOOSTER[digest] = booster
        return _BOOSTER[digest]
