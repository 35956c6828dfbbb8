"""Kind ``evaluate``: a model's classification metrics on a labelled table, computed by Spark.

The model runs once; its predictions are persisted and reduced to metrics in two passes, never
collected (``metrics``: the confusion matrix pass and the exact rank-aggregation ROC AUC pass).
The report is a files output: ``metrics.json``, ``roc.json`` (the curves, for compare) and
``roc.png``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, Inputs, Outputs, StageContext, kind
from dagspec.kinds.scoring.scoring_params import MODEL_AND_DATA, ScoringParams

METRICS_FILE = "metrics.json"
CURVES_FILE = "roc.json"
ROC_FIGURE = "roc.png"
TRAINING_STATS = ("train_time_s", "peak_memory_mb", "cpu_load")


class EvaluateParams(ScoringParams):
    """Classification metrics of a saved model on a labelled table, computed by Spark."""

    label_col: str | None = Field(
        default=None,
        min_length=1,
        description="class values, or a one-hot array/vector; default: model.json label_col, else 'label'",
    )
    clip_eps: float = Field(default=1e-15, gt=0, lt=0.5, description="log loss clips p to [eps, 1 - eps]")
    curve_points: int = Field(default=1000, ge=10, le=100_000, description="ROC points kept per class")


@kind("evaluate", params=EvaluateParams, inputs=MODEL_AND_DATA, outputs={"report": FILES}, reuse_workers=True)
def evaluate(inputs: Inputs, params: EvaluateParams, ctx: StageContext) -> Outputs:
    """ROC AUC (one-vs-rest per class), log loss, accuracy, confusion matrix, ROC plot.

    Writes ``report/metrics.json``, ``report/roc.json`` and ``report/roc.png``; metrics also to the
    manifest.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from dagspec.kinds.scoring.metrics import counts_metrics, label_index, roc_curves
    from dagspec.kinds.scoring.models import PREDICTION, PROBABILITY, read_model_meta, transform_with_model
    from dagspec.kinds.scoring.plots import plot_roc_panels

    model_dir, df = inputs["model"], inputs["data"]
    assert isinstance(model_dir, str) and not isinstance(df, str)
    meta = read_model_meta(model_dir)
    classes = [int(c) for c in meta["classes"]]
    label_col = params.label_col or meta.get("label_col") or "label"
    if label_col not in df.columns:
        raise StageFailedError(f"label column {label_col!r} is not in the data; columns: {', '.join(df.columns)}")
    predictions = transform_with_model(
        ctx.spark, model_dir, df, [label_col], batch_size=params.batch_size, min_rows_per_task=params.min_rows_per_task
    )
    scored = predictions.select(
        label_index(df.schema[label_col].dataType, F.col(label_col), classes).alias("label_idx"),
        F.col(PROBABILITY),
        (F.array_position(F.array(*[F.lit(c) for c in classes]), F.col(PREDICTION)) - 1).cast("int").alias("pred_idx"),
    )
    # the model runs once: both passes read the persisted predictions
    scored = scored.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        metrics = counts_metrics(scored, classes, params.clip_eps, label_col)
        positive_only = len(classes) == 2
        support = [metrics["per_class"][str(c)]["support"] for c in classes]
        totals = {k: (float(n), float(metrics["rows"] - n)) for k, n in enumerate(support)}
        if positive_only:
            totals = {1: totals[1]}
        aucs, curves = roc_curves(ctx.spark, scored, classes, totals, params.curve_points)
    finally:
        scored.unpersist()
    finite = [a for a in aucs.values() if a is not None]
    metrics = {
        "model": ctx.input_stage("model"),
        "flavor": meta["flavor"],
        "task": meta["task"],
        "classes": classes,
        "class_names": _class_names(meta, classes),
        **metrics,
        "roc_auc": (aucs[str(classes[1])] if positive_only else (sum(finite) / len(finite) if finite else None)),
        "roc_auc_per_class": aucs,
        **{key: meta.get(key) for key in TRAINING_STATS},
        "clip_eps": params.clip_eps,
    }
    report = ctx.local_output_dir("report")
    (report / METRICS_FILE).write_text(json.dumps(metrics, indent=2))
    (report / CURVES_FILE).write_text(json.dumps({"classes": classes, "curves": curves}))
    names = metrics["class_names"]
    plot_roc_panels(
        {"": {_curve_label(names[k], aucs[k]): curve for k, curve in curves.items()}},
        report / ROC_FIGURE,
        title=f"ROC: {metrics['model'] or ctx.stage_name} ({meta['task']})",
    )
    ctx.metrics.update({k: v for k, v in metrics.items() if k not in ("class_names",)})
    return {}


def _class_names(meta: Mapping[str, Any], classes: Sequence[int]) -> dict[str, str]:
    names = meta.get("class_names")
    if isinstance(names, list) and len(names) == len(classes):
        return {str(c): str(n) for c, n in zip(classes, names, strict=True)}
    return {str(c): str(c) for c in classes}


def _curve_label(name: str, auc: float | None) -> str:
    return f"{name} (AUC {auc:.4f})" if auc is not None else f"{name} (AUC undefined)"
