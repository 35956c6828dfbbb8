"""Kind ``compare``: evaluate reports side by side, one table (markdown + TSV) and one ROC figure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.scoring.evaluate import CURVES_FILE, METRICS_FILE
from dagspec.storage import local_path

TABLE_MD = "comparison.md"
TABLE_TSV = "comparison.tsv"
ROC_FIGURE = "roc.png"
# metric -> True when larger is better (for sort_by)
_BEST_HIGH = {"roc_auc": True, "accuracy": True, "log_loss": False}


class CompareParams(StageParams):
    """Put several evaluate reports side by side; input roles name the models."""

    sort_by: Literal["input", "roc_auc", "log_loss", "accuracy"] = Field(
        default="input", description="row order: as the inputs are listed, or best first by a metric"
    )
    title: str | None = Field(default=None, description="figure and table title")
    reference: dict[str, float] = Field(
        default_factory=dict,
        description="published ROC AUC per input role (e.g. a paper's), printed beside this run's",
    )
    reference_class: str | None = Field(
        default=None, description="the class (value or name) the reference AUCs are for; default: the overall roc_auc"
    )
    reference_note: str | None = Field(
        default=None, description="a paragraph under that table: source, why they differ"
    )


@kind("compare", params=CompareParams, any_inputs=True, any_inputs_type=FILES, fan_in=True, outputs={"report": FILES})
def compare(inputs: Inputs, params: CompareParams, ctx: StageContext) -> Outputs:
    """One markdown + TSV table and one ROC figure over several evaluate reports.

    Rows in input order (or best first); input roles are the model names.
    """
    from dagspec.kinds.scoring.plots import plot_roc_panels

    if not inputs:
        raise StageFailedError("compare needs at least one input (an evaluate stage's report)")
    reports = {role: _read_report(role, path) for role, path in inputs.items() if isinstance(path, str)}
    if len(reports) != len(inputs):
        tables = sorted(set(inputs) - set(reports))
        raise StageFailedError(f"inputs {tables} are tables; compare reads evaluate reports (files outputs)")
    first_role, first = next(iter(reports.items()))
    for role, (metrics, _) in reports.items():
        if metrics["classes"] != first[0]["classes"]:
            raise StageFailedError(
                f"reports disagree on the classes: {first_role!r} has {first[0]['classes']}, "
                f"{role!r} has {metrics['classes']}"
            )
    names: dict[str, str] = first[0].get("class_names") or {str(c): str(c) for c in first[0]["classes"]}
    header, rows = comparison_table({role: m for role, (m, _) in reports.items()}, names)
    if params.sort_by != "input":
        column = header.index(params.sort_by)
        high = _BEST_HIGH[params.sort_by]
        # reports without the metric go last whatever the direction
        rows.sort(key=lambda r: (r[column] is None, -(r[column] or 0) if high else (r[column] or 0)))
    title = params.title or f"{ctx.dag_id}: model comparison"
    out = ctx.local_output_dir("report")
    (out / TABLE_TSV).write_text(to_tsv(header, rows))
    markdown = f"# {title}\n\n{to_markdown(header, rows)}"
    if params.reference:
        markdown += reference_table({role: m for role, (m, _) in reports.items()}, names, params)
    (out / TABLE_MD).write_text(markdown)
    panels: dict[str, dict[str, Any]] = {}
    for role, (metrics, curves) in reports.items():
        for key, curve in curves["curves"].items():
            auc = metrics["roc_auc_per_class"].get(key)
            label = f"{role} (AUC {auc:.4f})" if auc is not None else role
            panels.setdefault(names.get(key, key) if len(curves["curves"]) > 1 else "", {})[label] = curve
    plot_roc_panels(panels, out / ROC_FIGURE, title=title)
    ctx.metrics["table"] = [dict(zip(header, r, strict=True)) for r in rows]
    return {}


def reference_table(metrics: Mapping[str, dict[str, Any]], names: Mapping[str, str], params: CompareParams) -> str:
    """This run's ROC AUC beside the published one, per model, with the note under it."""
    key = None
    if params.reference_class is not None:
        by_name = {name: value for value, name in names.items()}
        key = by_name.get(params.reference_class, params.reference_class)
        if key not in names:
            raise StageFailedError(f"reference_class {params.reference_class!r} is none of the classes {names}")
    what = f"ROC AUC of class {names[key]}" if key is not None else "ROC AUC"
    header = ["model", f"{what}, this run", "published", "difference"]
    rows: list[list[Any]] = []
    for role, published in params.reference.items():
        if role not in metrics:
            raise StageFailedError(f"reference names {role!r}, which is no input of this stage ({sorted(metrics)})")
        ours = metrics[role]["roc_auc_per_class"].get(key) if key is not None else metrics[role].get("roc_auc")
        rows.append([role, ours, published, None if ours is None else round(ours - published, 4)])
    note = f"\n{params.reference_note.strip()}\n" if params.reference_note else ""
    return f"\n## Against the published numbers\n\n{to_markdown(header, rows)}{note}"


def _read_report(role: str, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = Path(local_path(path))
    try:
        metrics = json.loads((folder / METRICS_FILE).read_text())
        curves = json.loads((folder / CURVES_FILE).read_text())
    except FileNotFoundError as exc:
        raise StageFailedError(f"input {role!r} ({path}) is not an evaluate report: {exc.filename} is missing") from exc
    return metrics, curves


def comparison_table(
    reports: Mapping[str, Mapping[str, Any]], names: Mapping[str, str]
) -> tuple[list[str], list[list[Any]]]:
    """Header and rows: one row per report; per-class AUC columns when there are more than two classes."""
    classes = [str(c) for c in next(iter(reports.values()))["classes"]]
    per_class = [f"auc_{names.get(c, c)}" for c in classes] if len(classes) > 2 else []
    header = [
        "model",
        "stage",
        "flavor",
        "rows",
        "roc_auc",
        *per_class,
        "log_loss",
        "accuracy",
        "train_time_s",
        "peak_memory_mb",
        "cpu_load",
    ]
    rows = []
    for role, m in reports.items():
        aucs = [m["roc_auc_per_class"].get(c) for c in classes] if per_class else []
        rows.append(
            [
                role,
                m.get("model"),
                m.get("flavor"),
                m.get("rows"),
                m.get("roc_auc"),
                *aucs,
                m.get("log_loss"),
                m.get("accuracy"),
                m.get("train_time_s"),
                m.get("peak_memory_mb"),
                m.get("cpu_load"),
            ]
        )
    return header, rows


def _cell(value: Any, missing: str, digits: int) -> str:
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) >= 1000 else f"{value:.{digits}f}"
    return str(value)


def to_tsv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Tab-separated, one header line, 8 decimals; missing values are empty fields."""
    lines = ["\t".join(header)] + ["\t".join(_cell(v, "", 8) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def to_markdown(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table; missing values are shown as n/a."""
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) for i in range(len(header))]
    align = ["---:" if n else "---" for n in numeric]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_cell(v, "n/a", 4) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
