"""Where a reader keeps the rows it rejects, and when it gives up.

A reader that rejects rows (``read`` with csv, tsv, json or criteo; ``read_criteo``) writes them
as Parquet (``line``: the raw text, ``reason``: the first problem found, ``file``) to the folder
``rejected/`` of its checkpoint: beside the outputs, not one of them, so a stage reading the reader
still gets its ``data``, and ``stage`` alone keeps meaning that table. The manifest's metrics
count the rows (``rejected``) and name the committed folder (``rejected_path``). Above
``max_rejected_fraction`` the stage fails with the count and three examples; the quarantine of
that attempt stays in its temporary folder until the next attempt or ``dagspec gc``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dagspec import footers
from dagspec.checkpoint import Checkpoint
from dagspec.errors import StageFailedError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.types import StructType

    from dagspec.kinds.base import StageContext

QUARANTINE = "rejected"
ROWS_PER_FILE = 1_000_000


def quarantine_schema() -> StructType:
    """The columns ``keep_rejected`` writes: ``line``, ``reason``, ``file``, all strings."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField(name, StringType()) for name in ("line", "reason", "file")])


def no_rejected(ctx: StageContext) -> DataFrame:
    """The quarantine of a reader that rejected nothing (the columns ``keep_rejected`` writes)."""
    return ctx.spark.createDataFrame([], quarantine_schema())


def committed_path(ctx: StageContext, name: str) -> str:
    """Where ``ctx.output_path(name)`` will be once the attempt is committed."""
    stage_dir = ctx.work_dir.rstrip("/").rsplit("/", 1)[0]
    return Checkpoint(stage_dir, ctx.fingerprint).output_path(name)


def keep_rejected(
    ctx: StageContext,
    rejected: DataFrame,
    *,
    rejected_n: int,
    rows_read: int,
    max_fraction: float,
    hint: Callable[[Sequence[Row]], str] | None = None,
) -> None:
    """Write the quarantine, record its metrics, and fail above ``max_fraction`` of ``rows_read``.

    ``rejected`` has the columns ``line``, ``reason`` and ``file``.
    """
    files = max(1, math.ceil(rejected_n / ROWS_PER_FILE))  # coalesce never adds partitions
    # nothing rejected (the usual case): the empty table is written without a Spark job
    if rejected_n or not footers.write_empty(ctx.output_path(QUARANTINE), quarantine_schema()):
        rejected.coalesce(files).write.mode("error").parquet(ctx.output_path(QUARANTINE))
    fraction = rejected_n / rows_read if rows_read else 0.0
    ctx.metrics.update(
        {
            "rows_read": rows_read,
            "rejected": rejected_n,
            "rows_rejected": rejected_n,
            "rejected_fraction": round(fraction, 6),
            "rejected_path": committed_path(ctx, QUARANTINE),
        }
    )
    if rejected_n and fraction > max_fraction:
        examples = rejected.limit(3).collect()
        shown = "\n".join(f"  [{r['reason']}] {str(r['line'])[:300]!r}" for r in examples)
        raise StageFailedError(
            f"{rejected_n} of {rows_read} rows rejected (fraction {fraction:.4f} > max_rejected_fraction "
            f"{max_fraction}); examples:\n{shown}{hint(examples) if hint else ''}\n"
            f"all rejected rows of this attempt: {ctx.output_path(QUARANTINE)} (kept until the next attempt)"
        )
