"""Kind ``split``: random split into named outputs (``stage.train``, ``stage.test``, ...)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, kind
from dagspec.kinds.quality.labels import class_counts, require_classes
from dagspec.kinds.sampling.row_hash import DrawParams, row_hash, uniform

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_HASH = "__dagspec_row_hash"


class SplitParams(DrawParams):
    """Random split into named outputs by a seeded hash of each row, optionally shuffling some outputs."""

    fractions: dict[str, float] = Field(min_length=2)
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

    df = inputs.table("data")
    if params.label_col is not None:  # one grouped count, before any row moves
        counts = class_counts(df, params.label_col, "split")
        if params.classes is not None:
            require_classes(counts, params.label_col, params.classes, "split")
        ctx.metrics["class_counts"] = counts
    # not randomSplit: its draw follows the scan's partitioning (see row_hash), and it sorts every
    # partition by all columns first. One hash of the row per output's pass: the draw is its top
    # bits, the shuffle's order a hash of it (not another hash of every column)
    hashed = df.select("*", row_hash(df, params.seed, ctx.written_stage, params.key).alias(_HASH))
    draw = uniform(F.col(_HASH))
    outputs: dict[str, DataFrame] = {}
    low = 0.0
    names = list(params.fractions)
    for i, name in enumerate(names):
        high = low + params.fractions[name]
        part = hashed.where((draw >= low) & (draw < high)) if i < len(names) - 1 else hashed.where(draw >= low)
        if name in params.shuffle:
            part = part.orderBy(F.xxhash64(F.col(_HASH), F.lit("shuffle")))
        outputs[name] = part.drop(_HASH)
        low = high
    return outputs
