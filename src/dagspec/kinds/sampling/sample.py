"""Kind ``sample``: exactly n rows at random, or several exact sizes (nested or independent)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, kind
from dagspec.kinds.sampling.exact import lowest_ranked, take_exact
from dagspec.kinds.sampling.row_hash import DrawParams

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class SampleParams(DrawParams):
    """Exactly ``n`` rows (output ``data``), or one output ``n<size>`` per entry of ``sizes``."""

    n: int | None = Field(default=None, ge=1)
    sizes: list[int] | None = Field(default=None, min_length=1)
    nested: bool = Field(default=True, description="sizes: each sample contains the smaller ones")

    @model_validator(mode="after")
    def _n_or_sizes(self) -> SampleParams:
        if (self.n is None) == (self.sizes is None):
            raise ValueError("give exactly one of 'n' or 'sizes'")
        if self.sizes is not None and (any(s < 1 for s in self.sizes) or len(set(self.sizes)) != len(self.sizes)):
            raise ValueError("sizes must be distinct and >= 1")
        return self

    def output_sizes(self) -> dict[str, int]:
        """Output name -> exact row count."""
        if self.sizes is None:
            assert self.n is not None
            return {"data": self.n}
        return {f"n{size}": size for size in sorted(self.sizes)}


@kind(
    "sample",
    params=SampleParams,
    inputs={"data": TABLE},
    outputs_from_params=lambda p: {name: TABLE for name in p.output_sizes()},
)
def sample(inputs: Inputs, params: SampleParams, ctx: StageContext) -> Outputs:
    """Exactly n rows at random (seeded), or several exact sizes, nested or independent."""
    df = inputs.table("data")
    sizes = params.output_sizes()
    result = {}
    if params.nested and len(sizes) > 1:
        largest = max(sizes.values())
        base = take_exact(df, {"": largest}, params.seed, ctx.written_stage, key=params.key, persist=ctx.persist)
        base = ctx.persist(base)  # read again for each smaller size
        for name, size in sizes.items():
            # the same hash ranks the base as it ranked the input: each sample is the input's `size`
            # lowest-ranked rows, so smaller samples nest and do not change when a larger size is added
            result[name] = (
                take_exact(base, {"": size}, params.seed, ctx.written_stage, key=params.key) if size < largest else base
            )
    else:  # one size, or independent sizes: each from the input
        for name, size in sizes.items():
            salt = ctx.written_stage if params.nested else f"{ctx.written_stage}/{name}"

            def exact(size: int = size, salt: str = salt) -> DataFrame:
                return take_exact(df, {"": size}, params.seed, salt, key=params.key, persist=ctx.persist)

            fast = lowest_ranked(df, {"": size}, params.seed, salt, key=params.key)  # one pass; may fall short
            if fast is not None:
                ctx.expect_rows(name, size, otherwise=exact)
            result[name] = fast if fast is not None else exact()
    ctx.metrics["sizes"] = sizes
    return result
