"""Kind ``generate_criteo_logs``: synthetic raw Criteo day files into the files output ``logs``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagspec.kinds.ctr import GenerateCriteoLogsParams
    from dagspec.runtime import StageContext


def generate_criteo_logs(
    inputs: Mapping[str, Any], params: GenerateCriteoLogsParams, ctx: StageContext
) -> dict[str, DataFrame]:
    """``logs/day_NN.tsv`` (see ``dagspec.generators.criteo``); the click rate goes to the metrics."""
    from dagspec.generators.criteo import write_criteo_logs

    stats = write_criteo_logs(
        ctx.spark,
        ctx.output_path("logs"),
        params.rows,
        params.days,
        params.seed,
        params.base_ctr,
        params.partitions_per_day,
        params.compress,
    )
    ctx.metrics.update({"rows": int(stats["rows"]), "click_rate": round(stats["ctr"], 5), "days": params.days})
    return {}
