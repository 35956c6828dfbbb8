"""Inference flavor ``xgboost`` (see ``dagspec.stages.model_io`` for the contract).

The booster travels as a broadcast of its JSON bytes and is loaded at most once per Python worker.
Only the model's inputs cross to Python, through a SCALAR_ITER Arrow UDF: the unwrapped vector
struct (hashed features, rebuilt as the same CSR matrix as in training) or one struct of the
numeric columns (as_is, NaN for nulls). ``with_prediction`` derives ``prediction`` in the JVM.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dagspec.errors import StageFailedError
from dagspec.stages.model_io import broadcast_artifact, numpy_to_probability, with_prediction

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, SparkSession

_LOCK = threading.Lock()
_BOOSTER: dict[str, Any] = {}


def transform(
    spark: SparkSession, model_dir: str, meta: dict[str, Any], df: DataFrame, keep_cols: list[str]
) -> DataFrame:
    """``keep_cols`` + ``probability`` ([P(0), P(1)]) + ``prediction``."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    columns = list(meta["input_columns"])
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise StageFailedError(f"the xgboost model reads columns {missing} that the data lacks; columns: {df.columns}")
    features_col = meta.get("features_col")
    n_features = int(meta["num_features"])
    missing_value = float(meta.get("missing", float("nan")))
    blob, digest = broadcast_artifact(spark, model_dir, meta)
    if features_col:
        # the struct's fields one by one: an Arrow UDF refuses the unwrapped struct itself (still a UDT)
        vector = F.unwrap_udt(features_col)
        model_inputs = [vector["type"], vector["indices"], vector["values"]]
    else:
        model_inputs = [F.struct(*[F.col(c) for c in columns])]

    def score(batches: Iterator[Any]) -> Iterator[pa.Array]:
        import pyarrow as pa
        import xgboost as xgb

        from dagspec.stages.ctr_arrow import csr_from_vectors, dense_from_columns

        booster = _load(blob, digest)
        for batch in batches:
            if features_col:
                types, indices, values = batch
                vectors = pa.StructArray.from_arrays([types, indices, values], names=["type", "indices", "values"])
                matrix = csr_from_vectors(vectors, n_features)
            else:
                matrix = dense_from_columns(pa.Table.from_struct_array(batch), columns)  # type: ignore[attr-defined]
            yield numpy_to_probability(booster.predict(xgb.DMatrix(matrix, missing=missing_value)), 2)

    with warnings.catch_warnings():  # pyspark prefers type hints; the explicit type is clearer here
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(score, "array<double>", ArrowUDFType.SCALAR_ITER)
    return with_prediction(df, keep_cols, udf(*model_inputs), meta["classes"])


def _load(blob: Broadcast[bytes], digest: str) -> Any:
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
