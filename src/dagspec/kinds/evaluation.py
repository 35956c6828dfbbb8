"""The model-consuming kinds: predict (batch inference), evaluate (metrics and ROC), compare.

Each takes a saved model through the files input ``model`` (any training kind's ``model`` output,
described by its ``model.json``; see ``docs/architecture.md``, "Models").
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dagspec.registry import InputRole, IOType, KindDef, StageParams, register

MODEL_AND_DATA = {"model": InputRole(type=IOType.FILES), "data": InputRole()}


class ScoringParams(StageParams):
    """How a saved model is applied to a table: shared by predict and evaluate."""

    batch_size: int = Field(default=1024, ge=1, le=1_000_000, description="rows per model call")
    min_rows_per_task: int = Field(
        default=20_000,
        ge=1,
        description="small inputs are scored by fewer Spark tasks (at least this many rows each):"
        " each task loads the model in its own Python worker",
    )


class PredictParams(ScoringParams):
    """Score a table with a saved model: kept columns, class probabilities, predicted class."""

    key_col: str | None = Field(default=None, min_length=1, description="row key to keep, e.g. event_id")
    passthrough: list[str] = Field(default_factory=list, description="more columns to keep unchanged")
    probabilities: Literal["columns", "array"] = Field(
        default="columns",
        description="'columns': one double column prob_<class> per class; "
        "'array': one array<double> column 'probability' in model.json classes order",
    )


register(
    KindDef(
        name="predict",
        params=PredictParams,
        function="dagspec.stages.predict:predict",
        version="1",
        description="Batch inference: class probabilities and the predicted class for every row.",
        inputs=MODEL_AND_DATA,
        outputs={"data": IOType.TABLE},
    )
)


class EvaluateParams(ScoringParams):
    """Classification metrics of a saved model on a labelled table, computed by Spark."""

    label_col: str | None = Field(
        default=None,
        min_length=1,
        description="class values, or a one-hot array/vector; default: model.json label_col, else 'label'",
    )
    clip_eps: float = Field(default=1e-15, gt=0, lt=0.5, description="log loss clips p to [eps, 1 - eps]")
    curve_points: int = Field(default=1000, ge=10, le=100_000, description="ROC points kept per class")


register(
    KindDef(
        name="evaluate",
        params=EvaluateParams,
        function="dagspec.stages.evaluate:evaluate",
        version="1",
        description="ROC AUC (one-vs-rest per class), log loss, accuracy, confusion matrix, ROC plot.",
        inputs=MODEL_AND_DATA,
        outputs={"report": IOType.FILES},
    )
)


class CompareParams(StageParams):
    """Put several evaluate reports side by side; input roles name the models."""

    sort_by: Literal["input", "roc_auc", "log_loss", "accuracy"] = Field(
        default="input", description="row order: as the inputs are listed, or best first by a metric"
    )
    title: str | None = Field(default=None, description="figure and table title")


register(
    KindDef(
        name="compare",
        params=CompareParams,
        function="dagspec.stages.compare:compare",
        version="1",
        description="One markdown + TSV table and one ROC figure over several evaluate reports.",
        any_inputs=True,
        any_inputs_type=IOType.FILES,
        outputs={"report": IOType.FILES},
    )
)
