"""A seeded hash of each row's content: the random draw of the sampling kinds.

``F.rand(seed)`` depends on which partition a row lands in and where, and a Parquet scan's
partitions follow the directory listing and file sizes, so the same seed over the same checkpoint
could draw different rows from one run to the next. A hash of the row's values does not depend on
partitioning: the same data and seed always draw the same rows (identical rows draw alike).

The stage's name as written in the spec salts the hash: without it, a split after an undersample
with the same seed would split by the very hash the undersample kept the lowest of (measured:
93/7 for 80/20), and a split of a split's output would find every row on one side of the same
threshold. A matrix stage's expansions share the salt, so exact samples of several sizes with one
seed nest (the CTR learning curve's training sets).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import StageParams

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Spark refuses to hash maps (their entry order is not defined): they are hashed as their JSON
_UNHASHABLE = ("map<", "variant")
_UNIT = float(2**53)


class DrawParams(StageParams):
    """The params of every kind that draws rows at random."""

    seed: int = 42
    key: list[str] | None = Field(
        default=None,
        min_length=1,
        description="columns that identify a row: the draw hashes only these (default: every column; "
        "naming an id column is faster on wide rows)",
    )


def row_hash(df: DataFrame, seed: int, salt: str, key: Sequence[str] | None = None) -> Column:
    """A 64-bit hash of ``seed``, ``salt`` (the stage's name and purpose) and the row's ``key``
    columns (default: all of them)."""
    from pyspark.sql import functions as F

    types = dict(df.dtypes)
    missing = [name for name in key or () if name not in types]
    if missing:
        raise StageFailedError(f"key column(s) {missing} not in the input; columns: {list(types)}")
    columns = [
        F.to_json(F.col(f"`{name}`")) if any(t in types[name] for t in _UNHASHABLE) else F.col(f"`{name}`")
        for name in key or types
    ]
    return F.xxhash64(F.lit(seed), F.lit(salt), *columns)


def uniform(hashed: Column) -> Column:
    """A number in [0, 1) from a row's hash (``row_hash``): uniform over distinct rows."""
    from pyspark.sql import functions as F

    return F.shiftrightunsigned(hashed, 11).cast("double") / F.lit(_UNIT)
