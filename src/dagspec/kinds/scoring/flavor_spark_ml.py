"""Inference flavor ``spark_ml`` (see ``dagspec.kinds.scoring.flavor_base`` for the contract).

A saved ``PipelineModel`` runs in the JVM (nothing crosses to Python); its probability vector
becomes ``array<double>`` and ``with_prediction`` derives the class. The model directory is read
through Spark, so on a cluster it must be on storage the executors can read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagspec.errors import StageFailedError
from dagspec.kinds.scoring.flavor_base import local_path, with_prediction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def transform(
    spark: SparkSession, model_dir: str, meta: dict[str, Any], df: DataFrame, keep_cols: list[str]
) -> DataFrame:
    """``keep_cols`` + ``probability`` + ``prediction`` from the saved PipelineModel."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    columns = list(meta["input_columns"])
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise StageFailedError(f"the spark_ml model reads columns {missing} that the data lacks; columns: {df.columns}")
    model = PipelineModel.load(str(local_path(model_dir) / meta["artifact"]))
    probability_col = meta.get("probability_col", "__probability")
    scored = model.transform(df)
    return with_prediction(scored, keep_cols, vector_to_array(F.col(probability_col)), meta["classes"])
