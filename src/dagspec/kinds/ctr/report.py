"""Kind ``report``: the Criteo benchmark's table and learning curves from ``evaluate`` reports.

Each input role is one (engine, train size) point: ``params.points[role]``, else a role named
``<engine>__<size>`` (``xgb_single__10000``). Writes ``report/metrics.tsv`` with exactly the
benchmark's columns, one PNG per metric against the train size (log x), one line per engine, and
``report/curves.json`` with the plotted points (and ``"ROC AUC interval"`` / ``"Log loss
interval"``: evaluate's confidence intervals, drawn as error bars, when the reports have them). The
ROC AUC and log loss plots also draw, dashed, the published curve of every engine of the run that
has one (``published``; ``kinds/ctr/published.py``: XGBoost beside ``xgb_*``, Vowpal Wabbit beside
``vw``, Spark ML LR and RF beside ``lr`` and ``rf``).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.ctr import published as seed
from dagspec.kinds.evaluation_report import EvaluationReport, read_evaluation_report
from dagspec.storage import local_path


class ReportParams(StageParams):
    """Benchmark table and learning curves from several ``evaluate`` reports (inputs: any roles).

    Each input role names one (engine, train size) point; ``points`` maps the role to them, or a
    role written ``<engine>__<size>`` (e.g. ``xgb__10000``) is parsed.
    """

    points: dict[str, tuple[str, int]] = Field(default_factory=dict, description="role -> [engine, train size]")
    engines: list[str] | None = Field(default=None, description="only these engines (default: all)")
    published: bool = Field(
        default=True,
        description="draw the seed benchmark's published curve (real Criteo 1TB) of every engine of the run that has"
        " one (xgb_*, vw, lr, rf) on the ROC AUC and log loss plots",
    )

    @field_validator("engines", mode="before")
    @classmethod
    def _engines_from_text(cls, value: object) -> object:
        # a run param rendered by Jinja arrives as "['xgb', 'lr']"; a plain "xgb, lr" works too
        if isinstance(value, str):
            return [name.strip().strip("'\"") for name in value.strip().strip("[]").split(",") if name.strip()]
        return value

    @model_validator(mode="after")
    def _sizes_positive(self) -> ReportParams:
        bad = [role for role, (_, size) in self.points.items() if size < 1]
        if bad:
            raise ValueError(f"train sizes must be >= 1 (roles {bad})")
        return self


COLUMNS = ["Engine", "Train size", "ROC AUC", "Log loss", "Train time", "Maximum memory", "CPU load"]
# columns with evaluate's intervals: error bars in the plots (metrics.tsv keeps the benchmark's columns)
INTERVALS = ("ROC AUC", "Log loss")
PLOTS = {
    "ROC AUC": "auc.png",
    "Log loss": "log_loss.png",
    "Train time": "train_time.png",
    "Maximum memory": "memory.png",
}
_ROLE = re.compile(r"^(?P<engine>.+?)__(?P<size>[0-9]+)$")


def point_of(role: str, params: ReportParams) -> tuple[str, int]:
    """The (engine, train size) an input role stands for."""
    if role in params.points:
        engine, size = params.points[role]
        return engine, int(size)
    match = _ROLE.match(role)
    if match is None:
        raise StageFailedError(
            f"report input {role!r}: name it <engine>__<train size> (e.g. xgb__10000) or list it in points"
        )
    return match["engine"], int(match["size"])


def read_report(directory: str) -> EvaluationReport:
    """evaluate's metrics.json of one report directory."""
    return read_evaluation_report(Path(local_path(directory)), shown_as=directory)


def table_row(evaluation: EvaluationReport) -> dict[str, Any]:
    """The benchmark's columns (and the interval ends) of one evaluate report."""
    values = {
        "ROC AUC": (evaluation.roc_auc, evaluation.roc_auc_ci),
        "Log loss": (evaluation.log_loss, evaluation.log_loss_ci),
        "Train time": (evaluation.train_time_s, None),
        "Maximum memory": (evaluation.peak_memory_mb, None),
        "CPU load": (evaluation.cpu_load, None),
    }
    row: dict[str, Any] = {column: value for column, (value, _) in values.items()}
    for column in INTERVALS:
        low, high = values[column][1] or (None, None)
        row.update({f"{column} low": low, f"{column} high": high})
    return row


@kind("report", params=ReportParams, any_inputs=True, fan_in=True, outputs={"report": FILES})
def report(inputs: Inputs, params: ReportParams, ctx: StageContext) -> Outputs:
    """metrics.tsv (Engine, Train size, ROC AUC, Log loss, ...) + plots vs train size.

    Writes ``report/metrics.tsv`` and ``report/{auc,log_loss,train_time,memory}.png``.
    """
    if not inputs:
        raise StageFailedError("report needs at least one evaluate report as input")
    rows: list[dict[str, Any]] = []
    for role, directory in sorted(inputs.items()):
        if not isinstance(directory, str):
            raise StageFailedError(f"report input {role!r} must be an evaluate report (files), got a table")
        engine, size = point_of(role, params)
        if params.engines is not None and engine not in params.engines:
            continue
        rows.append({"Engine": engine, "Train size": size, **table_row(read_report(directory))})
    rows.sort(key=lambda r: (r["Engine"], r["Train size"]))
    out = ctx.local_output_dir("report")
    with (out / "metrics.tsv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore", delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    curves = learning_curves(rows, params.published)
    (out / "curves.json").write_text(json.dumps(curves, indent=1))
    plot_learning_curves(curves, out)
    ctx.metrics.update({"points": len(rows), "engines": sorted({r["Engine"] for r in rows})})
    return {}


def learning_curves(rows: list[dict[str, Any]], published: bool) -> dict[str, dict[str, list[list[float]]]]:
    """column -> series name -> [[train size, value], ...] sorted by size: what the plots draw."""
    curves: dict[str, dict[str, list[list[float]]]] = {}
    engines = {r["Engine"] for r in rows}
    drawn = seed.curves_for(engines) if published else []
    for column in PLOTS:
        series: dict[str, list[list[float]]] = {}
        for engine in sorted(engines):
            points = sorted(
                [r["Train size"], r[column]] for r in rows if r["Engine"] == engine and r[column] is not None
            )
            if points:
                series[engine] = points
        for curve in drawn:
            published_points = curve.columns().get(column)
            if published_points:
                series[curve.label] = [[size, value] for size, value in sorted(published_points.items())]
        curves[column] = series
        if column in INTERVALS:  # "<column> interval": engine -> [[train size, low, high], ...]
            bars = {
                engine: sorted(
                    [r["Train size"], r[f"{column} low"], r[f"{column} high"]]
                    for r in rows
                    if r["Engine"] == engine and r[f"{column} low"] is not None
                )
                for engine in sorted(engines)
            }
            if any(bars.values()):
                curves[f"{column} interval"] = {engine: points for engine, points in bars.items() if points}
    return curves


def plot_learning_curves(curves: dict[str, dict[str, list[list[float]]]], out: Path) -> None:
    """One PNG per metric: metric against train size (log x), one line per engine (published: dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    units = {"Train time": " (s)", "Maximum memory": " (MB)"}
    colors = {curve.label: curve.color for curve in seed.CURVES}
    for column, filename in PLOTS.items():
        fig, ax = plt.subplots(figsize=(8, 4))
        bars = curves.get(f"{column} interval", {})
        for name, points in curves[column].items():
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            ends = {p[0]: (p[1], p[2]) for p in bars.get(name, [])}
            if name in seed.LABELS:
                ax.plot(xs, ys, label=name, linestyle="--", color=colors[name], marker="s", markersize=4)
            elif ends:  # the confidence intervals as error bars (none at points without one)
                below = [y - ends.get(x, (y, y))[0] for x, y in zip(xs, ys, strict=True)]
                above = [ends.get(x, (y, y))[1] - y for x, y in zip(xs, ys, strict=True)]
                ax.errorbar(xs, ys, yerr=[below, above], label=name, marker="o", capsize=3)
            else:
                ax.plot(xs, ys, label=name, marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("Train size (rows)")
        ax.set_ylabel(column + units.get(column, ""))
        ax.set_title(f"{column} vs train size")
        ax.grid(True, which="both", alpha=0.3)
        if curves[column]:
            ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside: curves stay visible
        fig.tight_layout()
        fig.savefig(out / filename, dpi=100)
        plt.close(fig)
