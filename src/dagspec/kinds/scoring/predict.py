"""Kind ``predict``: batch inference, any saved model applied to a table one Arrow batch at a time."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dagspec.kinds.base import Inputs, Outputs, StageContext, kind
from dagspec.kinds.scoring.scoring_params import MODEL_AND_DATA, ScoringParams


class PredictParams(ScoringParams):
    """Score a table with a saved model: kept columns, class probabilities, predicted class."""

    key_col: str | None = Field(default=None, min_length=1, description="row key to keep, e.g. event_id")
    passthrough: list[str] = Field(default_factory=list, description="more columns to keep unchanged")
    probabilities: Literal["columns", "array"] = Field(
        default="columns",
        description="'columns': one double column prob_<class> per class; "
        "'array': one array<double> column 'probability' in model.json classes order",
    )


@kind("predict", params=PredictParams, inputs=MODEL_AND_DATA, reuse_workers=True)
def predict(inputs: Inputs, params: PredictParams, ctx: StageContext) -> Outputs:
    """Batch inference: class probabilities and the predicted class for every row.

    Kept columns, then ``prob_<class>`` columns (or ``probability``), then ``prediction``.
    """
    from pyspark.sql import functions as F

    from dagspec.kinds.scoring.flavor_base import PREDICTION, PROBABILITY
    from dagspec.kinds.scoring.models import read_card, transform_with_model

    model_dir, df = inputs.files("model"), inputs.table("data")
    card = read_card(model_dir)
    keep = list(dict.fromkeys(([params.key_col] if params.key_col else []) + params.passthrough))
    scored = transform_with_model(
        ctx.spark, model_dir, df, keep, batch_size=params.batch_size, min_rows_per_task=params.min_rows_per_task
    )
    if params.probabilities == "columns":
        # getItem in the JVM: the model's UDF still runs once per row (the array is projected once)
        probs = [F.col(PROBABILITY).getItem(i).alias(f"prob_{c}") for i, c in enumerate(card.classes)]
        scored = scored.select(*keep, *probs, PREDICTION)
    ctx.metrics.update(flavor=card.flavor, task=card.task, classes=card.classes, model_stage=ctx.input_stage("model"))
    return {"data": scored}
