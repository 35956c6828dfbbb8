"""Kind ``export``: publish a table under ``<storage.root>/exports/<path>``, replacing it atomically.

Exports live in their own folder, where no checkpoint can ever be, and each records the
fingerprint of the stage that published it: a run whose export holds another fingerprint (a
later run with other params published there) publishes again even when its checkpoint exists.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from dagspec import checkpoint, footers, storage
from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, StageParams, kind


class ExportParams(StageParams):
    """Write a table to a fixed path under storage.root/exports, replacing the previous export atomically."""

    format: Literal["parquet", "csv", "libsvm", "vw"] = "parquet"
    path: str = Field(description="relative to <storage.root>/exports/")
    partitions: int | None = Field(default=None, ge=1)
    header: bool = True

    @field_validator("path")
    @classmethod
    def _path_stays_under_root(cls, path: str) -> str:
        return storage.check_relative(path)


@kind("export", params=ExportParams, inputs={"data": TABLE}, outputs={}, publishes="path")
def export(inputs: Inputs, params: ExportParams, ctx: StageContext) -> Outputs:
    """Write a table to a stable path (Parquet with a partition count, CSV, LibSVM or VW text)."""
    df = inputs.table("data")
    target = ctx.publish_path or checkpoint.export_target(ctx.storage_root, params.path)
    staged = checkpoint.staging_path(target)
    if params.partitions:
        df = df.repartition(params.partitions)
    if params.format == "parquet":
        df.write.mode("error").parquet(staged)
    elif params.format in ("libsvm", "vw"):
        from dagspec.kinds.ctr.text_formats import write_text_format

        write_text_format(df, staged, params.format)
    else:
        df.write.mode("error").csv(staged, header=params.header)
    rows = footers.count_rows(ctx.spark, staged) if params.format == "parquet" else None
    checkpoint.publish(staged, target, {"fingerprint": ctx.fingerprint, "dag_id": ctx.dag_id, "stage": ctx.stage_name})
    ctx.metrics["exported_to"] = target
    ctx.metrics["rows"] = rows
    return {}
