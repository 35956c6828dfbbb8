"""How a saved model is applied to a table: the params and inputs predict and evaluate share."""

from __future__ import annotations

from pydantic import Field

from dagspec.kinds.base import FILES, TABLE, StageParams

MODEL_AND_DATA = {"model": FILES, "data": TABLE}


class ScoringParams(StageParams):
    """How a saved model is applied to a table: shared by predict and evaluate."""

    batch_size: int = Field(default=1024, ge=1, le=1_000_000, description="rows per model call")
    min_rows_per_task: int = Field(
        default=20_000,
        ge=1,
        description="small inputs are scored by fewer Spark tasks (at least this many rows each):"
        " each task loads the model in its own Python worker",
    )
