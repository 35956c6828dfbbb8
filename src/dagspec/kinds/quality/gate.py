"""Kind ``gate``: a model passes on to the stages after it only if its evaluation meets the bounds.

Inputs: ``report`` (an ``evaluate`` report), optionally ``baseline`` (another one, e.g. the model
in production) and ``model`` (the model the report evaluates). The gate reads ``metrics.json``
and compares one metric (the overall ``roc_auc``, ``accuracy`` or ``log_loss``, or every class's
``roc_auc_per_class``, ``precision_per_class``, ``recall_per_class``) with ``min`` / ``max`` and,
against the baseline, ``max_regression`` (how much worse it may be; lower is better for
``log_loss``). A model that does not pass fails the stage with the numbers, so nothing downstream
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

GATE_FILE = "gate.json"
REPORT_METRICS = "metrics.json"  # what evaluate writes
PER_CLASS = {"roc_auc_per_class": "roc_auc", "precision_per_class": "precision", "recall_per_class": "recall"}
LOWER_IS_BETTER = ("log_loss",)
Metric = Literal["roc_auc", "accuracy", "log_loss", "roc_auc_per_class", "precision_per_class", "recall_per_class"]


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

    @model_validator(mode="after")
    def _bounds(self) -> GateParams:
        if self.min is None and self.max is None and self.max_regression is None:
            raise ValueError("a gate needs min, max or max_regression")
        if self.classes is not None and self.metric not in PER_CLASS:
            raise ValueError(f"classes applies to the per-class metrics ({', '.join(PER_CLASS)})")
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
    report = read_report(str(inputs["report"]), ctx.input_stage("report"))
    baseline_dir = inputs.get("baseline")
    baseline = read_report(str(baseline_dir), ctx.input_stage("baseline")) if baseline_dir is not None else None
    if params.max_regression is not None and baseline is None:
        raise StageFailedError("gate: max_regression needs the baseline input (another evaluate report)")
    if baseline is not None and params.max_regression is None:
        raise StageFailedError("gate: a baseline input is wired but max_regression is not set")
    model_dir, model_stage = inputs.get("model"), ctx.input_stage("model")
    if model_dir is not None and report.get("model") not in (None, model_stage):
        raise StageFailedError(
            f"gate: the report evaluates the model of {report.get('model')!r}, but the model input is {model_stage!r}"
        )
    values = metric_values(report, params)
    base_values = metric_values(baseline, params) if baseline is not None else {}
    failures = judge(values, base_values, params)
    verdict = {
        "passed": not failures,
        "metric": params.metric,
        "values": values,
        "baseline_values": base_values or None,
        "min": params.min,
        "max": params.max,
        "max_regression": params.max_regression,
        "report": ctx.input_stage("report"),
        "baseline": ctx.input_stage("baseline"),
        "model": report.get("model"),
        "failures": failures,
    }
    ctx.metrics.update(verdict)
    if failures:
        who = f"the model of {report.get('model') or ctx.input_stage('report')!r}"
        raise StageFailedError(f"gate: {who} does not pass:\n" + "\n".join(f"  {f}" for f in failures))
    out = ctx.local_output_dir("model")
    if model_dir is not None:
        shutil.copytree(storage.local_path(str(model_dir)), out, dirs_exist_ok=True)
    (out / GATE_FILE).write_text(json.dumps(verdict, indent=2))
    return {}


def read_report(path: str, stage: str | None) -> dict[str, Any]:
    """An evaluate report's ``metrics.json``."""
    file = Path(storage.local_path(path)) / REPORT_METRICS
    if not file.is_file():
        raise StageFailedError(f"gate: {stage or path} is not an evaluate report: no {REPORT_METRICS} in {path}")
    data = json.loads(file.read_text())
    if not isinstance(data, dict):
        raise StageFailedError(f"gate: {file} does not hold a JSON object")
    return data


def metric_values(report: dict[str, Any], params: GateParams) -> dict[str, float | None]:
    """The gated values: ``{metric: value}``, or ``{"<metric>[<class name>]": value}`` per class."""
    if params.metric not in PER_CLASS:
        return {params.metric: _number(report.get(params.metric))}
    names = {str(k): str(v) for k, v in (report.get("class_names") or {}).items()}
    classes = [str(c) for c in report.get("classes") or []]
    if params.metric == "roc_auc_per_class":
        per_class = {str(k): v for k, v in (report.get("roc_auc_per_class") or {}).items()}
    else:
        key = PER_CLASS[params.metric]
        per_class = {str(k): (v or {}).get(key) for k, v in (report.get("per_class") or {}).items()}
    if params.classes is None:  # every class the report has a value for (binary ROC: the positive one)
        wanted = [c for c in classes if c in per_class]
    else:
        wanted = [_class_value(c, names, classes) for c in params.classes]
    missing = [c for c in wanted if c not in per_class]
    if missing:
        raise StageFailedError(
            f"gate: the report has no {params.metric} for classes {missing} (it has {sorted(per_class)}; "
            "binary reports give roc_auc_per_class for the positive class only)"
        )
    return {f"{params.metric}[{names.get(c, c)}]": _number(per_class[c]) for c in wanted}


def _class_value(wanted: str, names: dict[str, str], classes: list[str]) -> str:
    if wanted in classes:
        return wanted
    by_name = {name: value for value, name in names.items()}
    if wanted in by_name:
        return by_name[wanted]
    raise StageFailedError(f"gate: no class {wanted!r} in the report (classes {classes}, names {list(names.values())})")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not math.isnan(value) else None


def judge(values: dict[str, float | None], base: dict[str, float | None], params: GateParams) -> list[str]:
    """One line per bound not met, with the numbers."""
    failures = []
    lower_better = params.metric in LOWER_IS_BETTER
    for name, value in values.items():
        if value is None:
            failures.append(f"{name}: undefined in the report (a class without positives or negatives?)")
            continue
        if params.min is not None and value < params.min:
            failures.append(f"{name}: {value:.4f} < min {params.min}")
        if params.max is not None and value > params.max:
            failures.append(f"{name}: {value:.4f} > max {params.max}")
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
