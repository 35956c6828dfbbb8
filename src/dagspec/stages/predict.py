"""Batch inference: any saved model applied to a table, one Arrow batch at a time."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dagspec.kinds.evaluation import PredictParams
from dagspec.runtime import StageContext
from dagspec.stages.model_io import PREDICTION, PROBABILITY, read_model_meta, transform_with_model

Inputs = Mapping[str, DataFrame | str]


def predict(inputs: Inputs, params: PredictParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Kept columns, then ``prob_<class>`` columns (or ``probability``), then ``prediction``."""
    model_dir, df = inputs["model"], inputs["data"]
    assert isinstance(model_dir, str) and isinstance(df, DataFrame)
    meta = read_model_meta(model_dir)
    keep = list(dict.fromkeys(([params.key_col] if params.key_col else []) + params.passthrough))
    scored = transform_with_model(
        ctx.spark, model_dir, df, keep, batch_size=params.batch_size, min_rows_per_task=params.min_rows_per_task
    )
    if params.probabilities == "columns":
        # getItem in the JVM: the model's UDF still runs once per row (the array is projected once)
        probs = [F.col(PROBABILITY).getItem(i).alias(f"prob_{c}") for i, c in enumerate(meta["classes"])]
        scored = scored.select(*keep, *probs, PREDICTION)
    ctx.metrics.update(flavor=meta["flavor"], task=meta["task"], classes=meta["classes"], model_stage=_model_stage(ctx))
    return {"data": scored}


def _model_stage(ctx: StageContext) -> str | None:
    source = ctx.stage.inputs.get("model")
    return source.stage if source is not None else None
