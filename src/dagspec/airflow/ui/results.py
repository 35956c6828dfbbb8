"""What the UI shows of a DAG run, computed from its spec and committed checkpoints (no Airflow here).

A run is resolved again with its params (the spec's defaults updated by the run's conf) and its
logical date: the same fingerprints its tasks resolved, hence the same checkpoints. Each stage's
row says what ``dagspec show`` says (state and cache reasons) and what the manifest recorded
(rows, quarantined rows, duration, whether this run computed it or found it committed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from dagspec.errors import DagspecError
from dagspec.kinds.base import IOType
from dagspec.plan.events import HEADLINE_METRICS
from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import pipelines_dir, spec_files
from dagspec.spec.models import FORCE_PARAM, PipelineSpec
from dagspec.spec.together import load_specs
from dagspec.storage import project_home


@dataclass(frozen=True)
class RunInfo:
    """The parts of an Airflow DAG run the pages use."""

    dag_id: str
    run_id: str
    state: str
    conf: Mapping[str, Any] = field(default_factory=dict)
    logical_date: datetime | None = None
    start_date: datetime | None = None
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None


@dataclass(frozen=True)
class TaskInfo:
    """One task instance of the run: its state and duration."""

    state: str | None
    duration: float | None = None


@dataclass(frozen=True)
class StageRow:
    """One stage of a run, as the run page shows it."""

    stage: ResolvedStage
    task: TaskInfo | None
    state: str  # the checkpoint now: done / missing
    reasons: list[str]
    ran: bool | None  # computed by this run (True), found committed (False), unknown (None)
    manifest: dict[str, Any] | None
    rows_in: int | None
    rows_out: int | None
    rows_rejected: int | None


@lru_cache(maxsize=8)
def _specs(folder: str, stamp: tuple[tuple[str, int], ...]) -> dict[str, PipelineSpec]:
    paths = [Path(p) for p, _ in stamp]
    return {loaded.spec.dag_id: loaded.spec for loaded in load_specs(paths, str) if loaded.spec is not None}


def find_spec(dag_id: str, home: Path | None = None) -> PipelineSpec:
    """The spec of ``dag_id`` among the project's pipelines (read again when a file changes)."""
    folder = pipelines_dir(home or project_home())
    files = spec_files(folder)
    stamp = tuple((str(p), p.stat().st_mtime_ns) for p in files)
    specs = _specs(str(folder), stamp)
    if dag_id not in specs:
        raise DagspecError(f"no dagspec pipeline has dag_id {dag_id!r} (in {folder})")
    return specs[dag_id]


def run_params(spec: PipelineSpec, run: RunInfo) -> dict[str, Any]:
    """The params the run resolved its stages with: the spec's defaults, then the run's conf."""
    return {k: v for k, v in default_context(spec, run.conf)["params"].items() if k != FORCE_PARAM}


def run_context(spec: PipelineSpec, run: RunInfo) -> dict[str, Any]:
    """The template context of the run's tasks (``dagspec.airflow.operator.template_context``)."""
    context: dict[str, Any] = default_context(spec, run.conf)
    context["run_id"] = run.run_id
    if run.logical_date is not None:
        date = run.logical_date
        context.update(
            logical_date=date,
            ds=date.strftime("%Y-%m-%d"),
            ds_nodash=date.strftime("%Y%m%d"),
            ts=date.isoformat(),
            ts_nodash=date.strftime("%Y%m%dT%H%M%S"),
        )
    if run.data_interval_start is not None:
        context["data_interval_start"] = run.data_interval_start
    if run.data_interval_end is not None:
        context["data_interval_end"] = run.data_interval_end
    return context


def resolve_run(spec: PipelineSpec, run: RunInfo) -> dict[str, ResolvedStage]:
    """The run's stages, resolved as its tasks resolved them."""
    return resolve_pipeline(spec, run_context(spec, run), storage_root=os.environ.get("DAGSPEC_STORAGE_ROOT"))


def _ran(manifest: Mapping[str, Any] | None, run: RunInfo) -> bool | None:
    began = str((manifest or {}).get("started") or "")
    if not began or run.start_date is None:
        return None
    return datetime.fromisoformat(began) >= run.start_date


def _rows_in(stage: ResolvedStage, plan: Mapping[str, ResolvedStage]) -> int | None:
    total, known = 0, False
    for source in stage.inputs.values():
        if source.type != IOType.TABLE or source.stage not in plan:
            continue
        manifest = plan[source.stage].checkpoint.manifest() or {}
        rows = (manifest.get("rows") or {}).get(source.output)
        if isinstance(rows, int):
            total, known = total + rows, True
    return total if known else None


def stage_rows(plan: Mapping[str, ResolvedStage], run: RunInfo, tasks: Mapping[str, TaskInfo]) -> list[StageRow]:
    """Every stage of a resolved run, upstream first."""
    rows = []
    for name, stage in plan.items():
        status = stage_status(stage)
        manifest = stage.checkpoint.manifest()  # an export not (or no longer) published still has one
        metrics = (manifest or {}).get("metrics") or {}
        written = (manifest or {}).get("rows") or {}
        rows.append(
            StageRow(
                stage=stage,
                task=tasks.get(name),
                state=status.state,
                reasons=status.reasons,
                ran=_ran(manifest, run),
                manifest=manifest,
                rows_in=_rows_in(stage, plan),
                rows_out=sum(int(v) for v in written.values()) if written else None,
                rows_rejected=metrics.get("rows_rejected"),
            )
        )
    return rows


def _numbers(name: str, value: Any) -> dict[str, float]:
    if isinstance(value, bool) or value is None:
        return {}
    if isinstance(value, int | float):
        return {name: float(value)}
    if isinstance(value, Mapping):
        return {f"{name}[{k}]": float(v) for k, v in value.items() if isinstance(v, int | float)}
    return {}


def stage_metrics(manifest: Mapping[str, Any] | None) -> dict[str, float]:
    """A manifest's headline metrics as numbers (a per-class dict becomes ``metric[class]``)."""
    metrics = (manifest or {}).get("metrics") or {}
    found: dict[str, float] = {}
    for key in HEADLINE_METRICS:
        found.update(_numbers(key, metrics.get(key)))
    return found


@dataclass(frozen=True)
class RunMetrics:
    """One run in the comparison: its params and, per stage, its metric values."""

    run: RunInfo
    params: dict[str, Any]
    values: dict[str, dict[str, float]]  # stage -> metric -> value
    error: str = ""


def compare_runs(spec: PipelineSpec, runs: Sequence[RunInfo]) -> list[RunMetrics]:
    """The headline metrics of each run's committed stages, newest run first."""
    compared = []
    for run in runs:
        params = run_params(spec, run)
        try:
            plan = resolve_run(spec, run)
        except DagspecError as exc:
            compared.append(RunMetrics(run, params, {}, str(exc).splitlines()[0]))
            continue
        values = {}
        for name, stage in plan.items():
            found = stage_metrics(stage.checkpoint.manifest())
            if found:
                values[name] = found
        compared.append(RunMetrics(run, params, values))
    return compared


def differing_params(compared: Sequence[RunMetrics]) -> list[str]:
    """The params whose values are not the same in every run compared."""
    names = sorted({k for c in compared for k in c.params})
    return [n for n in names if len({repr(c.params.get(n)) for c in compared}) > 1]


def metric_names(compared: Sequence[RunMetrics]) -> list[str]:
    """Every metric some stage of some run recorded."""
    return sorted({m for c in compared for values in c.values.values() for m in values})
