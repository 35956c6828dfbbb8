"""Kind ``split``: random split into named outputs (``stage.train``, ``stage.test``, ...)."""

from __future__ import annotations

import math

from pydantic import Field, model_validator

from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.quality.labels import class_counts, require_classes


class SplitParams(StageParams):
    """Random split into named outputs (Spark's randomSplit), optionally shuffling some outputs."""

    fractions: dict[str, float] = Field(min_length=2)
    seed: int = 42
    shuffle: list[str] = Field(default_factory=list)
    label_col: str | None = Field(
        default=None, description="when set: null labels fail the split with the count; class counts in the manifest"
    )
    classes: list[int] | None = Field(default=None, min_length=2, description="with label_col: the only labels allowed")

    @model_validator(mode="after")
    def _fractions_make_sense(self) -> SplitParams:
        for name, fraction in self.fractions.items():
            if not name.isidentifier():
                raise ValueError(f"output name {name!r} must be an identifier")
            if not 0 < fraction < 1:
                raise ValueError(f"fraction {name!r} must be in (0, 1), got {fraction}")
        if not math.isclose(sum(self.fractions.values()), 1.0, abs_tol=1e-6):
            raise ValueError(f"fractions must sum to 1, got {sum(self.fractions.values())}")
        unknown = [s for s in self.shuffle if s not in self.fractions]
        if unknown:
            raise ValueError(f"shuffle names {unknown} that are not outputs ({', '.join(self.fractions)})")
        if self.classes is not None and self.label_col is None:
            raise ValueError("classes needs label_col")
        return self


@kind(
    "split",
    params=SplitParams,
    inputs={"data": TABLE},
    outputs={"train": TABLE, "test": TABLE},
    outputs_from_params=lambda p: {name: TABLE for name in p.fractions},
)
def split(inputs: Inputs, params: SplitParams, ctx: StageContext) -> Outputs:
    """Split randomly into named outputs (stage.train, stage.test, ...)."""
    from pyspark.sql import functions as F

    df = inputs["data"]
    assert not isinstance(df, str)
    if params.label_col is not None:  # one grouped count, before any row moves
        counts = class_counts(df, params.label_col, "split")
        if params.classes is not None:
            require_classes(counts, params.label_col, params.classes, "split")
        ctx.metrics["class_counts"] = counts
    names = list(params.fractions)
    parts = df.randomSplit([params.fractions[n] for n in names], seed=params.seed)
    return {
        name: part.orderBy(F.rand(params.seed)) if name in params.shuffle else part
        for name, part in zip(names, parts, strict=True)
    }
