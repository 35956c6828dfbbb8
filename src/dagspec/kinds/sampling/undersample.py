"""Kind ``undersample``: the same number of rows of every class, seeded and exact."""

from __future__ import annotations

from pydantic import Field, field_validator

from dagspec.errors import StageFailedError
from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, kind
from dagspec.kinds.quality.labels import class_counts
from dagspec.kinds.sampling.exact import lowest_ranked, take_exact
from dagspec.kinds.sampling.row_hash import DrawParams


class UndersampleParams(DrawParams):
    """Undersample to the minority class count, or to explicit per-class counts."""

    label_col: str = "label"
    target_counts: dict[str, int] | None = Field(
        default=None, description="class value (as a string) -> rows to keep; default: the minority count"
    )

    @field_validator("target_counts")
    @classmethod
    def _counts_positive(cls, counts: dict[str, int] | None) -> dict[str, int] | None:
        if counts is not None and (not counts or any(v < 1 for v in counts.values())):
            raise ValueError("target_counts must map each class to a count >= 1")
        return counts


@kind("undersample", params=UndersampleParams, inputs={"data": TABLE})
def undersample(inputs: Inputs, params: UndersampleParams, ctx: StageContext) -> Outputs:
    """Keep exactly the minority class count of every class (or given counts)."""
    df = inputs.table("data")
    before = class_counts(df, params.label_col, "undersample")  # null labels fail here, with the count
    if params.target_counts is not None:
        unknown = sorted(set(params.target_counts) - set(before))
        if unknown:
            raise StageFailedError(f"target_counts names classes not in the data: {unknown}; classes: {sorted(before)}")
        quotas = dict(params.target_counts)
    else:
        minority = min(before.values())
        quotas = {c: minority for c in before}
    draw = (df, quotas, params.seed, ctx.written_stage, params.label_col, params.key)
    result = lowest_ranked(*draw, totals=before)  # one pass; may fall short (identical rows)
    if result is not None:
        expected = sum(min(q, before.get(c, 0)) for c, q in quotas.items())
        ctx.expect_rows("data", expected, otherwise=lambda: take_exact(*draw, persist=ctx.persist, totals=before))
    else:
        result = take_exact(*draw, persist=ctx.persist, totals=before)
    ctx.metrics["class_counts_before"] = before
    ctx.metrics["class_counts_after"] = {c: min(q, before.get(c, 0)) for c, q in quotas.items()}
    return {"data": result}
