"""Kind ``generate_criteo_logs``: synthetic raw Criteo day files into the files output ``logs``."""

from __future__ import annotations

from pydantic import Field

from dagspec.kinds.base import FILES, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.ctr.logs_generator import BASE_CTR


class GenerateCriteoLogsParams(StageParams):
    """Synthetic click logs in the exact raw Criteo format, one file per day."""

    rows: int = Field(ge=0, description="total rows over all days (0 writes empty day files)")
    days: int = Field(default=1, ge=1, le=366)
    seed: int = 42
    base_ctr: float = Field(
        default=BASE_CTR, gt=0, lt=1, description="fraction of clicks (1 TiB data: ~3%; Kaggle's: ~25%)"
    )
    partitions_per_day: int = Field(default=2, ge=1)
    compress: bool = Field(default=False, description="write day_NN.tsv.gz instead of day_NN.tsv")


@kind("generate_criteo_logs", params=GenerateCriteoLogsParams, inputs={}, outputs={"logs": FILES})
def generate_criteo_logs(inputs: Inputs, params: GenerateCriteoLogsParams, ctx: StageContext) -> Outputs:
    """Synthetic Criteo-format click logs (day_NN.tsv files) with a planted signal.

    Writes ``logs/day_NN.tsv`` (see ``dagspec.kinds.ctr.logs_generator``); the click rate goes to
    the metrics.
    """
    from dagspec.kinds.ctr.logs_generator import write_criteo_logs

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
