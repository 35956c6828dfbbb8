"""Kind ``evaluate``: a model's classification metrics on a labelled table, computed by Spark.

The model runs once; its predictions are persisted and reduced to metrics in two passes, never
collected (``metrics``: the confusion matrix pass and the exact rank-aggregation ROC AUC pass).
The report is a files output: ``metrics.json`` (an ``EvaluationReport``), ``roc.json (the curves, for compare) and
``roc.png``; with ``key_col``, ``placements/`` (per-row DeLong placements, for paired tests).
Every metric has a confidence interval: DeLong's for the ROC AUCs (from the AUC's own pass), a
seeded Poisson bootstrap for accuracy and log loss (``bootstrap``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, Inputs, Outputs, StageContext, kind
from dagspec.kinds.evaluation_report import Counts, EvaluationReport, IntervalMethods
from dagspec.kinds.scoring.scoring_params import MODEL_AND_DATA, ScoringParams

CURVES_FILE = "roc.json"
ROC_FIGURE = "roc.png"


class EvaluateParams(ScoringParams):
    """Classification metrics of a saved model on a labelled table, computed by Spark."""

    label_col: str | None = Field(
        default=None,
        min_length=1,
        description="class values, or a one-hot array/vector; default: model.json label_col, else 'label'",
    )
    clip_eps: float = Field(default=1e-15, gt=0, lt=0.5, description="log loss clips p to [eps, 1 - eps]")
    curve_points: int = Field(default=1000, ge=10, le=100_000, description="ROC points kept per class")
    confidence_level: float = Field(default=0.95, gt=0.5, lt=1, description="of every interval (and paired test)")
    bootstrap_replicates: int = Field(
        default=200, ge=0, le=10_000, description="Poisson bootstrap replicates for accuracy and log loss; 0: none"
    )
    seed: int = Field(default=42, description="the bootstrap's weights")
    key_col: str | None = Field(
        default=None,
        min_length=1,
        description="a unique row key: evaluate then writes per-row DeLong placements, for compare's and"
        " gate's paired tests against another model evaluated on the same rows",
    )


@kind("evaluate", params=EvaluateParams, inputs=MODEL_AND_DATA, outputs={"report": FILES}, reuse_workers=True)
def evaluate(inputs: Inputs, params: EvaluateParams, ctx: StageContext) -> Outputs:
    """ROC AUC (one-vs-rest per class), log loss, accuracy, confusion matrix, ROC plot.

    Writes ``report/metrics.json``, ``report/roc.json`` and ``report/roc.png``; metrics also to the
    manifest.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from dagspec.kinds.scoring.bootstrap import bootstrap_intervals
    from dagspec.kinds.scoring.flavor_base import PREDICTION, PROBABILITY
    from dagspec.kinds.scoring.metrics import counts_metrics, label_index, roc_pass
    from dagspec.kinds.scoring.models import read_card, transform_with_model
    from dagspec.kinds.scoring.placements import PLACEMENTS_DIR, write_placements
    from dagspec.kinds.scoring.plots import plot_roc_panels

    model_dir, df = inputs.files("model"), inputs.table("data")
    card = read_card(model_dir)
    classes = card.classes
    label_col = params.label_col or card.label_col or "label"
    for role, column in (("label column", label_col), ("key_col", params.key_col)):
        if column is not None and column not in df.columns:
            raise StageFailedError(f"{role} {column!r} is not in the data; columns: {', '.join(df.columns)}")
    keep = [params.key_col] if params.key_col else []
    predictions = transform_with_model(
        ctx.spark,
        model_dir,
        df,
        [label_col, *keep],
        batch_size=params.batch_size,
        min_rows_per_task=params.min_rows_per_task,
    )
    scored = predictions.select(
        *keep,
        label_index(df.schema[label_col].dataType, F.col(label_col), classes).alias("label_idx"),
        F.col(PROBABILITY),
        (F.array_position(F.array(*[F.lit(c) for c in classes]), F.col(PREDICTION)) - 1).cast("int").alias("pred_idx"),
    )
    level = params.confidence_level
    # the model runs once: every pass reads the persisted predictions
    scored = scored.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = Counts.model_validate(counts_metrics(scored, classes, params.clip_eps, label_col))
        positive_only = len(classes) == 2
        support = [counts.per_class[str(c)].support for c in classes]
        totals = {k: (float(n), float(counts.rows - n)) for k, n in enumerate(support)}
        if positive_only:
            totals = {1: totals[1]}
        roc = roc_pass(ctx.spark, scored, classes, totals, params.curve_points, keep=keep)
        try:
            if params.key_col:
                write_placements(roc, params.key_col, f"{ctx.output_path('report')}/{PLACEMENTS_DIR}")
        finally:
            if keep:
                roc.distinct.unpersist()
        bootstrapped = (
            bootstrap_intervals(scored, params.clip_eps, params.bootstrap_replicates, params.seed, level)
            if params.bootstrap_replicates
            else {"accuracy_ci": None, "log_loss_ci": None}
        )
    finally:
        scored.unpersist()
    aucs, curves = roc.aucs, roc.curves
    bootstrap = "poisson bootstrap percentiles" if params.bootstrap_replicates else None
    evaluation = EvaluationReport(
        **counts.model_dump(),
        model=ctx.input_stage("model"),
        flavor=card.flavor,
        task=card.task,
        classes=classes,
        class_names=card.class_names_by_value(),
        **auc_intervals(roc.aucs, roc.variances, classes, level),
        **bootstrapped,
        intervals=IntervalMethods(
            level=level,
            roc_auc="delong" if positive_only else "delong, conservative for the macro mean",
            accuracy=bootstrap,
            log_loss=bootstrap,
            bootstrap_replicates=params.bootstrap_replicates,
            seed=params.seed,
        ),
        placements=PLACEMENTS_DIR if params.key_col else None,
        train_time_s=card.train_time_s,
        peak_memory_mb=card.peak_memory_mb,
        cpu_load=card.cpu_load,
        clip_eps=params.clip_eps,
    )
    report = ctx.local_output_dir("report")
    evaluation.write(report)
    (report / CURVES_FILE).write_text(json.dumps({"classes": classes, "curves": curves}))
    ci = evaluation.roc_auc_per_class_ci
    plot_roc_panels(
        {"": {curve_label(evaluation.class_name(k), aucs[k], ci.get(k)): curve for k, curve in curves.items()}},
        report / ROC_FIGURE,
        title=f"ROC: {evaluation.model or ctx.stage_name} ({card.task})",
    )
    # the manifest's metrics: the report's numbers (JSON types), without the version and the names
    ctx.metrics.update(evaluation.model_dump(mode="json", exclude={"class_names", "report_version"}))
    return {}


def auc_intervals(
    aucs: Mapping[str, float | None], variances: Mapping[str, Any], classes: Sequence[int], level: float
) -> dict[str, Any]:
    """``roc_auc``, ``roc_auc_ci``, ``roc_auc_per_class`` and ``roc_auc_per_class_ci`` (DeLong's)."""
    from dagspec.kinds.scoring.intervals import mean_interval, normal_interval

    per_class_ci = {k: normal_interval(aucs[k], variances[k].variance, level) for k in aucs}
    if len(classes) == 2:
        key = str(classes[1])
        return {
            "roc_auc": aucs[key],
            "roc_auc_ci": per_class_ci[key],
            "roc_auc_per_class": dict(aucs),
            "roc_auc_per_class_ci": per_class_ci,
        }
    finite = [a for a in aucs.values() if a is not None]
    return {
        "roc_auc": sum(finite) / len(finite) if finite else None,
        "roc_auc_ci": mean_interval(list(per_class_ci.values()), list(aucs.values())),
        "roc_auc_per_class": dict(aucs),
        "roc_auc_per_class_ci": per_class_ci,
    }


def curve_label(name: str, auc: float | None, interval: Sequence[float] | None = None) -> str:
    """A legend entry: ``tt (AUC 0.9810 [0.9790, 0.9830])``."""
    if auc is None:
        return f"{name} (AUC undefined)"
    return f"{name} (AUC {with_interval(auc, interval)})"


def with_interval(value: float, interval: Sequence[float] | None, digits: int = 4) -> str:
    """``value [low, high]``, or the bare value without an interval."""
    if interval is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
