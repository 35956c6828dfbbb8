"""Kind ``compare``: evaluate reports side by side, one table (markdown + TSV) and one ROC figure."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.evaluation_report import EvaluationReport, read_evaluation_report
from dagspec.kinds.scoring.evaluate import CURVES_FILE, with_interval
from dagspec.storage import local_path

TABLE_MD = "comparison.md"
TABLE_TSV = "comparison.tsv"
PAIRED_FILE = "paired_tests.json"
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
    first_role, (first, _) = next(iter(reports.items()))
    for role, (evaluation, _) in reports.items():
        if evaluation.classes != first.classes:
            raise StageFailedError(
                f"reports disagree on the classes: {first_role!r} has {first.classes}, {role!r} has {evaluation.classes}"
            )
    names = {c: first.class_name(c) for c in first.class_keys()}
    header, rows, cis = comparison_table({role: m for role, (m, _) in reports.items()}, names)
    if params.sort_by != "input":
        column = header.index(params.sort_by)
        high = _BEST_HIGH[params.sort_by]
        # reports without the metric go last whatever the direction
        order = sorted(
            range(len(rows)),
            key=lambda i: (rows[i][column] is None, -(rows[i][column] or 0) if high else (rows[i][column] or 0)),
        )
        rows, cis = [rows[i] for i in order], [cis[i] for i in order]
    title = params.title or f"{ctx.dag_id}: model comparison"
    out = ctx.local_output_dir("report")
    (out / TABLE_TSV).write_text(to_tsv(*with_interval_columns(header, rows, cis)))
    markdown = f"# {title}\n\n{to_markdown(header, rows, cis)}"
    markdown += (
        f"\nIn brackets: {first.intervals.level:.0%} confidence intervals (ROC AUC: DeLong; others: bootstrap).\n"
    )
    if params.reference:
        markdown += reference_table({role: m for role, (m, _) in reports.items()}, names, params)
    paired = paired_table(ctx, {role: (m, str(inputs[role])) for role, (m, _) in reports.items()}, names)
    markdown += paired.markdown
    (out / TABLE_MD).write_text(markdown)
    (out / PAIRED_FILE).write_text(json.dumps(paired.tests, indent=2))
    panels: dict[str, dict[str, Any]] = {}
    for role, (evaluation, curves) in reports.items():
        for key, curve in curves["curves"].items():
            auc = evaluation.roc_auc_per_class.get(key)
            ci = evaluation.roc_auc_per_class_ci.get(key)
            label = f"{role} (AUC {with_interval(auc, ci)})" if auc is not None else role
            panels.setdefault(names.get(key, key) if len(curves["curves"]) > 1 else "", {})[label] = curve
    plot_roc_panels(panels, out / ROC_FIGURE, title=title)
    ctx.metrics["table"] = [dict(zip(header, r, strict=True)) for r in rows]
    ctx.metrics["paired_tests"] = paired.tests
    return {}


def reference_table(metrics: Mapping[str, EvaluationReport], names: Mapping[str, str], params: CompareParams) -> str:
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
    cis: list[dict[str, Any]] = []
    for role, published in params.reference.items():
        if role not in metrics:
            raise StageFailedError(f"reference names {role!r}, which is no input of this stage ({sorted(metrics)})")
        m = metrics[role]
        ours = m.roc_auc_per_class.get(key) if key is not None else m.roc_auc
        ci = m.roc_auc_per_class_ci.get(key) if key is not None else m.roc_auc_ci
        rows.append([role, ours, published, None if ours is None else round(ours - published, 4)])
        cis.append({header[1]: ci})
    note = f"\n{params.reference_note.strip()}\n" if params.reference_note else ""
    return f"\n## Against the published numbers\n\n{to_markdown(header, rows, cis)}{note}"


@dataclass
class PairedTable:
    """The paired DeLong tests of a comparison: a markdown section and the tests as JSON rows."""

    markdown: str
    tests: list[dict[str, Any]]


def paired_table(
    ctx: StageContext, reports: Mapping[str, tuple[EvaluationReport, str]], names: Mapping[str, str]
) -> PairedTable:
    """Every pair of reports with per-row placements: is the ROC AUC difference significant (paired DeLong)?"""
    from dagspec.kinds.scoring.placements import paired_tests

    if len(reports) < 2:
        return PairedTable("", [])
    heading = "\n## Paired tests of the ROC AUC (DeLong, on the same rows)\n\n"
    without = [role for role, (m, _) in reports.items() if not m.placements]
    if without:
        return PairedTable(
            f"{heading}None: the evaluate stages of {', '.join(without)} have no key_col, so no per-row placements.\n",
            [],
        )
    level = next(iter(reports.values()))[0].intervals.level
    header = ["model", "against", "class", "AUC difference", "p-value", f"significant at {level:.0%}"]
    rows: list[list[Any]] = []
    cis: list[dict[str, Any]] = []
    tests: list[dict[str, Any]] = []
    problems: list[str] = []
    for a, b in itertools.combinations(reports, 2):
        try:
            by_class = paired_tests(ctx.spark, reports[a], reports[b], level)
        except StageFailedError as exc:
            problems.append(f"- {a} against {b}: {exc}")
            continue
        for key, test in by_class.items():
            tests.append({"model": a, "against": b, "class": key, **test})
            significant = test["significant"]
            rows.append(
                [a, b, names.get(key, key), test["difference"], _p_value(test["p_value"]), _yes_no(significant)]
            )
            cis.append({"AUC difference": test["difference_ci"]})
    table = to_markdown(header, rows, cis) if rows else ""
    return PairedTable(heading + table + "".join(f"\n{p}" for p in problems) + ("\n" if problems else ""), tests)


def _p_value(p: float | None) -> str:
    return "n/a" if p is None else (f"{p:.2g}" if p < 0.001 else f"{p:.4f}")


def _yes_no(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


def _read_report(role: str, path: str) -> tuple[EvaluationReport, dict[str, Any]]:
    folder = Path(local_path(path))
    try:
        evaluation = read_evaluation_report(folder, shown_as=path)
    except StageFailedError as exc:
        raise StageFailedError(f"input {role!r}: {exc}") from exc
    try:
        curves = json.loads((folder / CURVES_FILE).read_text())
    except FileNotFoundError as exc:
        raise StageFailedError(f"input {role!r} ({path}) is not an evaluate report: {exc.filename} is missing") from exc
    return evaluation, curves


def comparison_table(
    reports: Mapping[str, EvaluationReport], names: Mapping[str, str]
) -> tuple[list[str], list[list[Any]], list[dict[str, Any]]]:
    """Header, rows and the intervals of each row by column (None where a report has no interval).

    One row per report; per-class AUC columns when there are more than two classes.
    """
    classes = next(iter(reports.values())).class_keys()
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
    rows, cis = [], []
    for role, m in reports.items():
        aucs = [m.roc_auc_per_class.get(c) for c in classes] if per_class else []
        cis.append(
            {
                "roc_auc": m.roc_auc_ci,
                "log_loss": m.log_loss_ci,
                "accuracy": m.accuracy_ci,
                **({column: m.roc_auc_per_class_ci.get(c) for column, c in zip(per_class, classes, strict=True)}),
            }
        )
        rows.append(
            [
                role,
                m.model,
                m.flavor,
                m.rows,
                m.roc_auc,
                *aucs,
                m.log_loss,
                m.accuracy,
                m.train_time_s,
                m.peak_memory_mb,
                m.cpu_load,
            ]
        )
    return header, rows, cis


def with_interval_columns(
    header: Sequence[str], rows: Sequence[Sequence[Any]], cis: Sequence[Mapping[str, Any]]
) -> tuple[list[str], list[list[Any]]]:
    """The table with ``<column>_low`` and ``<column>_high`` after the others, for every column with intervals."""
    columns = [h for h in header if any(h in ci for ci in cis)]
    extra = [f"{c}_{end}" for c in columns for end in ("low", "high")]
    out = [
        [*row, *[(ci.get(c) or [None, None])[end] for c in columns for end in (0, 1)]]
        for row, ci in zip(rows, cis, strict=True)
    ]
    return [*header, *extra], out


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


def to_markdown(
    header: Sequence[str], rows: Sequence[Sequence[Any]], cis: Sequence[Mapping[str, Any]] | None = None
) -> str:
    """A GitHub markdown table; missing values are shown as n/a; ``value [low, high]`` where ``cis`` has one."""
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) for i in range(len(header))]
    align = ["---:" if n else "---" for n in numeric]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for index, row in enumerate(rows):
        intervals = cis[index] if cis is not None else {}
        cells = [
            with_interval(v, intervals[h]) if isinstance(v, float) and intervals.get(h) else _cell(v, "n/a", 4)
            for h, v in zip(header, row, strict=True)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
