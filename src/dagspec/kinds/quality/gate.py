"""Kind ``gate``: a model passes on to the stages after it only if its evaluation meets the bounds.

Inputs: ``report`` (an ``evaluate`` report), optionally ``baseline`` (another one, e.g. the model
in production) and ``model`` (the model the report evaluates). The gate reads ``metrics.json``
(an ``EvaluationReport``) and compares one metric (the overall ``roc_auc``, ``accuracy`` or ``log_loss``, or every class's
``roc_auc_per_class``, ``precision_per_class``, ``recall_per_class``) with ``min`` / ``max`` and,
against the baseline, ``max_regression`` (how much worse it may be; lower is better for
``log_loss``). ``bound: low`` (or ``high``) compares ``min`` / ``max`` with an end of the metric's
confidence interval instead of its value, and ``better_than_baseline`` asks a paired DeLong test
whether the ROC AUC beats the baseline's significantly. A model that does not pass fails the stage with the numbers, so nothing downstream
runs. The files output ``model`` holds ``gate.json`` (the verdict and the numbers) and, when the
``model`` input is wired, a copy of the model: stages after the gate (``predict``, exports) read the
model from the gate and so run only for a model that passed (TFX's "blessing").
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from dagspec import storage
from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, InputRole, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.evaluation_report import EvaluationReport, PerClass, read_evaluation_report

GATE_FILE = "gate.json"
PER_CLASS: dict[str, PerClass] = {
    "roc_auc_per_class": "roc_auc",
    "precision_per_class": "precision",
    "recall_per_class": "recall",
}
LOWER_IS_BETTER = ("log_loss",)
Metric = Literal["roc_auc", "accuracy", "log_loss", "roc_auc_per_class", "precision_per_class", "recall_per_class"]
WITH_INTERVALS = ("roc_auc", "accuracy", "log_loss", "roc_auc_per_class")


class GateParams(StageParams):
    """Bounds a model's evaluation must meet: absolute (min, max) and against a baseline (max_regression)."""

    metric: Metric = "roc_auc"
    min: float | None = Field(default=None, description="the metric (every class's, for *_per_class) at least this")
    max: float | None = Field(default=None, description="at most this (e.g. log_loss)")
    max_regression: float | None = Field(
        default=None, ge=0, description="worse than the baseline report by at most this (needs the baseline input)"
    )
    classes: list[str] | None = Field(
        default=None, min_length=1, description="*_per_class: only these classes (values or names); default all"
    )
    bound: Literal["value", "low", "high"] = Field(
        default="value",
        description="what min and max compare: the metric's value, or the low or high end of its confidence"
        " interval (evaluate's confidence_level)",
    )
    better_than_baseline: bool = Field(
        default=False,
        description="roc_auc / roc_auc_per_class: higher than the baseline's by a paired DeLong test significant at"
        " the report's confidence level (both evaluate stages need key_col, on the same rows)",
    )

    @model_validator(mode="after")
    def _bounds(self) -> GateParams:
        if self.min is None and self.max is None and self.max_regression is None and not self.better_than_baseline:
            raise ValueError("a gate needs min, max, max_regression or better_than_baseline")
        if self.classes is not None and self.metric not in PER_CLASS:
            raise ValueError(f"classes applies to the per-class metrics ({', '.join(PER_CLASS)})")
        if self.bound != "value" and self.metric not in WITH_INTERVALS:
            raise ValueError(f"bound: {self.bound} needs a metric with intervals ({', '.join(WITH_INTERVALS)})")
        if self.bound != "value" and self.min is None and self.max is None:
            raise ValueError(f"bound: {self.bound} applies to min and max; set one of them")
        if self.better_than_baseline and self.metric not in ("roc_auc", "roc_auc_per_class"):
            raise ValueError("better_than_baseline tests the ROC AUC: metric roc_auc or roc_auc_per_class")
        return self


@kind(
    "gate",
    params=GateParams,
    inputs={
        "report": FILES,
        "baseline": InputRole(FILES, required=False),
        "model": InputRole(FILES, required=False),
    },
    outputs={"model": FILES},
)
def gate(inputs: Inputs, params: GateParams, ctx: StageContext) -> Outputs:
    """Fail unless the evaluated model meets the metric bounds; pass the model (and gate.json) on."""
    report_dir, baseline_dir = inputs.files("report"), inputs.optional_files("baseline")
    report = read_report(report_dir, ctx.input_stage("report"))
    baseline = read_report(baseline_dir, ctx.input_stage("baseline")) if baseline_dir is not None else None
    for needs, name in (
        (params.max_regression is not None, "max_regression"),
        (params.better_than_baseline, "better_than_baseline"),
    ):
        if needs and baseline is None:
            raise StageFailedError(f"gate: {name} needs the baseline input (another evaluate report)")
    if baseline is not None and params.max_regression is None and not params.better_than_baseline:
        raise StageFailedError(
            "gate: a baseline input is wired but neither max_regression nor better_than_baseline is set"
        )
    model_dir, model_stage = inputs.optional_files("model"), ctx.input_stage("model")
    if model_dir is not None and report.model not in (None, model_stage):
        raise StageFailedError(
            f"gate: the report evaluates the model of {report.model!r}, but the model input is {model_stage!r}"
        )
    values = metric_values(report, params)
    base_values = metric_values(baseline, params) if baseline is not None else {}
    intervals = metric_intervals(report, params)
    failures = judge(values, base_values, params, intervals)
    paired: dict[str, Any] = {}
    if params.better_than_baseline and baseline is not None and baseline_dir is not None:
        paired = paired_verdicts(ctx, report, baseline, (report_dir, baseline_dir), params)
        failures += not_better(values, base_values, paired)
    verdict = {
        "passed": not failures,
        "metric": params.metric,
        "values": values,
        "baseline_values": base_values or None,
        "min": params.min,
        "max": params.max,
        "max_regression": params.max_regression,
        "bound": params.bound,
        "intervals": intervals,
        "better_than_baseline": params.better_than_baseline,
        "paired_tests": paired or None,
        "report": ctx.input_stage("report"),
        "baseline": ctx.input_stage("baseline"),
        "model": report.model,
        "failures": failures,
    }
    ctx.metrics.update(verdict)
    if failures:
        who = f"the model of {report.model or ctx.input_stage('report')!r}"
        raise StageFailedError(f"gate: {who} does not pass:\n" + "\n".join(f"  {f}" for f in failures))
    out = ctx.local_output_dir("model")
    if model_dir is not None:
        shutil.copytree(storage.local_path(str(model_dir)), out, dirs_exist_ok=True)
    (out / GATE_FILE).write_text(json.dumps(verdict, indent=2))
    return {}


def read_report(path: str, stage: str | None) -> EvaluationReport:
    """An evaluate report's ``metrics.json``, as its ``EvaluationReport``."""
    try:
        return read_evaluation_report(Path(storage.local_path(path)), shown_as=path)
    except StageFailedError as exc:
        raise StageFailedError(f"gate: input {stage or path!r}: {exc}") from exc


def metric_values(report: EvaluationReport, params: GateParams) -> dict[str, float | None]:
    """The gated values: ``{metric: value}``, or ``{"<metric>[<class name>]": value}`` per class."""
    if params.metric not in PER_CLASS:
        return {params.metric: _number(report.value(params.metric))}  # type: ignore[arg-type]
    per_class = report.per_class_values(PER_CLASS[params.metric])
    return {f"{params.metric}[{report.class_name(c)}]": _number(per_class[c]) for c in wanted_classes(report, params)}


def wanted_classes(report: EvaluationReport, params: GateParams) -> list[str]:
    """The class values a per-class gate checks (every class the report has a value for, by default)."""
    names = {c: report.class_name(c) for c in report.class_keys()}
    classes = report.class_keys()
    have = set(report.per_class_values(PER_CLASS[params.metric]))
    if params.classes is None:  # binary ROC: the positive class only
        wanted = [c for c in classes if c in have]
    else:
        wanted = [_class_value(c, names, classes) for c in params.classes]
    missing = [c for c in wanted if c not in have]
    if missing:
        raise StageFailedError(
            f"gate: the report has no {params.metric} for classes {missing} (it has {sorted(have)}; "
            "binary reports give roc_auc_per_class for the positive class only)"
        )
    return wanted


def metric_intervals(report: EvaluationReport, params: GateParams) -> dict[str, list[float] | None]:
    """The confidence intervals of the gated values, by the names ``metric_values`` gives them."""
    if params.metric not in WITH_INTERVALS:
        return {}
    if params.metric not in PER_CLASS:
        return {params.metric: _interval(report.interval(params.metric))}  # type: ignore[arg-type]
    per_class = report.roc_auc_per_class_ci
    return {
        f"{params.metric}[{report.class_name(c)}]": _interval(per_class.get(c)) for c in wanted_classes(report, params)
    }


def _interval(value: tuple[float, float] | None) -> list[float] | None:
    return None if value is None else [value[0], value[1]]


def _class_value(wanted: str, names: dict[str, str], classes: list[str]) -> str:
    if wanted in classes:
        return wanted
    by_name = {name: value for value, name in names.items()}
    if wanted in by_name:
        return by_name[wanted]
    raise StageFailedError(f"gate: no class {wanted!r} in the report (classes {classes}, names {list(names.values())})")


def _number(value: float | None) -> float | None:
    return float(value) if isinstance(value, int | float) and not math.isnan(value) else None


def judge(
    values: dict[str, float | None],
    base: dict[str, float | None],
    params: GateParams,
    intervals: dict[str, list[float] | None] | None = None,
) -> list[str]:
    """One line per bound not met, with the numbers (``intervals``: for ``bound: low`` or ``high``)."""
    failures = []
    lower_better = params.metric in LOWER_IS_BETTER
    for name, value in values.items():
        if value is None:
            failures.append(f"{name}: undefined in the report (a class without positives or negatives?)")
            continue
        checked, what = value, f"{value:.4f}"
        if params.bound != "value":
            interval = (intervals or {}).get(name)
            if interval is None:
                failures.append(
                    f"{name}: the report has no confidence interval (evaluated without intervals, or fewer than"
                    " 2 rows of a class)"
                )
                continue
            checked = interval[0] if params.bound == "low" else interval[1]
            what = f"{params.bound} {checked:.4f} of {value:.4f} [{interval[0]:.4f}, {interval[1]:.4f}]"
        if params.min is not None and checked < params.min:
            failures.append(f"{name}: {what} < min {params.min}")
        if params.max is not None and checked > params.max:
            failures.append(f"{name}: {what} > max {params.max}")
        if params.max_regression is not None:
            reference = base.get(name)
            if reference is None:
                failures.append(f"{name}: the baseline report has no value to compare with")
                continue
            limit = reference + params.max_regression if lower_better else reference - params.max_regression
            if (value > limit) if lower_better else (value < limit):
                sign = "+" if lower_better else "-"
                relation = ">" if lower_better else "<"
                failures.append(
                    f"{name}: {value:.4f} {relation} baseline {reference:.4f} {sign} max_regression "
                    f"{params.max_regression} = {limit:.4f}"
                )
    return failures


def paired_verdicts(
    ctx: StageContext,
    report: EvaluationReport,
    baseline: EvaluationReport,
    folders: tuple[str, str],
    params: GateParams,
) -> dict[str, Any]:
    """Paired DeLong tests of the report against the baseline, by gated value name."""
    from dagspec.kinds.scoring.placements import paired_tests

    level = report.intervals.level
    try:
        by_class = paired_tests(ctx.spark, (report, folders[0]), (baseline, folders[1]), level)
    except StageFailedError as exc:
        raise StageFailedError(f"gate: better_than_baseline: {exc}") from exc
    if params.metric == "roc_auc":
        classes = report.class_keys()
        if len(classes) != 2:
            raise StageFailedError(
                "gate: better_than_baseline on a multiclass report tests each class: use metric roc_auc_per_class"
            )
        return {"roc_auc": {**by_class[classes[1]], "level": level}}
    return {
        f"roc_auc_per_class[{report.class_name(c)}]": {**by_class[c], "level": level}
        for c in wanted_classes(report, params)
    }


def not_better(values: dict[str, float | None], base: dict[str, float | None], paired: dict[str, Any]) -> list[str]:
    """One line per value that does not beat the baseline significantly."""
    failures = []
    for name, test in paired.items():
        if test["significant"] and test["difference"] > 0:
            continue
        value, reference = values.get(name), base.get(name)
        if test["difference"] is None or value is None or reference is None:
            failures.append(f"{name}: no paired test (fewer than 2 rows of a class?)")
            continue
        low, high = test["difference_ci"] or [math.nan, math.nan]
        failures.append(
            f"{name}: {value:.4f} is not significantly better than the baseline's {reference:.4f} (paired DeLong: "
            f"difference {test['difference']:+.4f} [{low:+.4f}, {high:+.4f}], p = {test['p_value']:.3g}, "
            f"level {test['level']})"
        )
    return failures
