"""Inference flavor ``xgboost``: a saved booster applied with ``mapInArrow`` (loaded once per task).

The booster travels as a broadcast of its JSON bytes, so executors need no access to the model
directory. Features are rebuilt exactly as in training (``ctr_arrow``): CSR from the unwrapped
vector column, or a float32 matrix with NaN for nulls.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagspec.errors import StageFailedError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def transform(
    spark: SparkSession, model_dir: str, meta: dict[str, Any], df: DataFrame, keep_cols: list[str]
) -> DataFrame:
    """``keep_cols`` + ``probability`` (array<double>: P(0), P(1)) + ``prediction`` (int)."""
    from pyspark.sql import functions as F  # noqa: N812 - the usual Spark spelling
    from pyspark.sql.types import ArrayType, DoubleType, IntegerType, StructField, StructType

    needed = list(meta["input_columns"])
    missing = [c for c in [*needed, *keep_cols] if c not in df.columns]
    if missing:
        raise StageFailedError(f"xgboost model needs columns {missing} that the data lacks (has {df.columns})")
    booster_bytes = (Path(model_dir.removeprefix("file://")) / meta["artifact"]).read_bytes()
    shared = spark.sparkContext.broadcast(booster_bytes)
    features_col = meta.get("features_col")
    feature_exprs = [F.unwrap_udt(features_col).alias(features_col)] if features_col else [F.col(c) for c in needed]
    internal = [f"__k{i}" for i in range(len(keep_cols))]
    selected = df.select(*[F.col(c).alias(a) for c, a in zip(keep_cols, internal, strict=True)], *feature_exprs)
    keep_fields = [StructField(a, df.schema[c].dataType, True) for c, a in zip(keep_cols, internal, strict=True)]
    schema = StructType(
        [
            *keep_fields,
            StructField("probability", ArrayType(DoubleType(), False), False),
            StructField("prediction", IntegerType(), False),
        ]
    )
    meta_small = {k: meta[k] for k in ("features_col", "input_columns", "num_features", "missing")}

    def predict(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow as pa
        import xgboost as xgb

        from dagspec.stages.ctr_arrow import features_of

        booster = xgb.Booster()
        booster.load_model(bytearray(shared.value))
        for batch in batches:
            if batch.num_rows == 0:
                continue
            matrix = xgb.DMatrix(features_of(batch, meta_small), missing=meta_small["missing"])
            p1 = booster.predict(matrix).astype(np.float64)
            probs = np.stack([1.0 - p1, p1], axis=1).reshape(-1)
            offsets = pa.array(np.arange(0, 2 * len(p1) + 1, 2, dtype=np.int32))
            probability = pa.ListArray.from_arrays(offsets, pa.array(probs, pa.float64()))
            prediction = pa.array((p1 >= 0.5).astype(np.int32))
            columns = [batch.column(a) for a in internal] + [probability, prediction]
            yield pa.RecordBatch.from_arrays(columns, schema=_arrow_schema(schema))

    result = selected.mapInArrow(predict, schema)
    return result.select(
        *[F.col(a).alias(c) for c, a in zip(keep_cols, internal, strict=True)], "probability", "prediction"
    )


def _arrow_schema(schema: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)
