"""What the UI shows of a DAG run: the run's own records (no Airflow here, nothing resolved again).

A run's page is its history: each stage's record (``dagspec.plan.history``), written by its task
when it ended, says the fingerprint that run resolved, ``ran`` or ``hit``, the checkpoint, rows and
metrics. An old run is never resolved again with today's spec, code or data (those give today's
fingerprints); a run without records says so. Only the checkpoint's files (reports, plots, model
cards) are read from the recorded checkpoint, with its state now: still committed, committed again
since by a forced run, or removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from dagspec import storage
from dagspec.checkpoint import Checkpoint, lease_is_live
from dagspec.errors import DagspecError
from dagspec.plan.events import HEADLINE_METRICS
from dagspec.plan.history import StageRecord, read_run
from dagspec.plan.progress import PROGRESS_PREFIX, StageProgress, read_progress
from dagspec.plan.resolved import PARTITIONS_DIR
from dagspec.spec.loader import pipelines_dir, spec_files
from dagspec.spec.models import PipelineSpec
from dagspec.spec.together import load_specs
from dagspec.storage import project_home

ACTIVE_STATES = ("queued", "running")
NO_RECORDS = (
    "No record of what this run ran: it ran before dagspec recorded runs, or none of its stages finished. "
    "Its results are not worked out again from today's spec, code and data: that would show another run's "
    "checkpoints."
)
NOTHING_YET = "No stage of this run has finished yet."


@dataclass(frozen=True)
class RunInfo:
    """The parts of an Airflow DAG run the pages use."""

    dag_id: str
    run_id: str
    state: str
    conf: Mapping[str, Any] = field(default_factory=dict)
    logical_date: datetime | None = None
    start_date: datetime | None = None


@dataclass(frozen=True)
class TaskInfo:
    """One task instance of the run: its state and duration."""

    state: str | None
    duration: float | None = None


@dataclass(frozen=True)
class StageRow:
    """One stage of a run, as the run page shows it: the task's state and, once it ended, its record."""

    name: str
    task: TaskInfo | None
    record: StageRecord | None
    now: str = ""  # the recorded checkpoint now: committed / replaced / removed / broken ("": no record)
    now_detail: str = ""
    progress: StageProgress | None = None  # a running task's latest progress (``dagspec.plan.progress``)
    kind: str = ""  # the spec's, for a stage without a record yet (a recorded stage's is its record's)

    @property
    def rows_out(self) -> int | None:
        return sum(self.record.rows.values()) if self.record and self.record.rows else None

    @property
    def rows_rejected(self) -> Any:
        return self.record.metrics.get("rows_rejected") if self.record else None

    @property
    def shows_files(self) -> bool:
        """Are the recorded checkpoint's files there to read (as committed then, or as committed again)?"""
        return self.now in ("committed", "replaced")


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


def stage_of(task_id: str) -> str:
    """The stage a task runs (a stage inside a task group is ``group.stage``)."""
    return task_id.rsplit(".", 1)[-1]


def checkpoint_now(record: StageRecord) -> tuple[str, str]:
    """The recorded checkpoint today: ``committed`` (as the run left it), ``replaced`` (a forced run
    committed the fingerprint again), ``removed`` (``dagspec gc``) or ``broken``; and a detail."""
    fingerprints = record.metrics.get("partition_fingerprints")
    if isinstance(fingerprints, dict):  # a partitioned stage: each partition it read or computed
        kept = [
            key
            for key, fingerprint in fingerprints.items()
            if Checkpoint(f"{record.stage_dir}/{PARTITIONS_DIR}/{key}", str(fingerprint)).state(record.outputs).done
        ]
        computed = record.metrics.get("partitions_computed") or []
        ran = f"; this run computed {len(computed)}: {', '.join(map(str, computed[:8]))}" if computed else ""
        if len(kept) == len(fingerprints):
            return "committed", f"{len(kept)} partitions{ran}"
        return "removed", f"{len(fingerprints) - len(kept)} of {len(fingerprints)} partitions removed since{ran}"
    found = record.checkpoint_ref.state(record.outputs)
    if found.state == "missing":
        return "removed", "removed since (dagspec gc): the run's record remains"
    if not found.done:
        return "broken", found.detail
    finished = str((record.checkpoint_ref.manifest() or {}).get("finished") or "")
    if record.finished and finished and finished != record.finished:
        return "replaced", f"committed again since by a forced run ({finished}): its files are that run's"
    return "committed", ""


def running_progress(root: str, dag_id: str, stage: str) -> StageProgress | None:
    """The latest progress a live attempt of ``stage`` keeps beside its checkpoints (a killed
    attempt's file, whose lease is not live, is not shown)."""
    stage_dir = storage.join_under(root, f"{dag_id}/{stage}")
    found = []
    for name in storage.list_names(stage_dir):
        if name.startswith(PROGRESS_PREFIX) and name.endswith(".json"):
            fingerprint = name[len(PROGRESS_PREFIX) : -len(".json")]
            progress = read_progress(stage_dir, fingerprint) if lease_is_live(stage_dir, fingerprint) else None
            found += [progress] if progress is not None else []
    return max(found, key=lambda p: p.updated, default=None)


def stage_rows(
    order: Sequence[str],
    records: Mapping[str, StageRecord],
    tasks: Mapping[str, TaskInfo],
    running: Callable[[str], StageProgress | None] | None = None,
    kinds: Mapping[str, str] | None = None,
) -> list[StageRow]:
    """The run's stages: those it recorded or has a task for, in ``order`` (the spec's), then any other;
    ``running(stage)``: the progress of a stage whose task runs; ``kinds``: each stage's kind in the spec."""
    by_stage = {stage_of(task_id): info for task_id, info in tasks.items()}
    present = set(records) | set(by_stage)
    names = [n for n in order if n in present] + sorted(present - set(order))
    rows = []
    for name in names:
        record = records.get(name)
        now, detail = checkpoint_now(record) if record else ("", "")
        task = by_stage.get(name)
        progress = running(name) if running and record is None and task and task.state == "running" else None
        rows.append(StageRow(name, task, record, now, detail, progress, (kinds or {}).get(name, "")))
    return rows


def missing_records_note(run: RunInfo, records: Mapping[str, StageRecord]) -> str:
    """What the run page says when the run recorded nothing ("" when it did)."""
    if records:
        return ""
    return NOTHING_YET if run.state in ACTIVE_STATES else NO_RECORDS


def _numbers(name: str, value: Any) -> dict[str, float]:
    if isinstance(value, bool) or value is None:
        return {}
    if isinstance(value, int | float):
        return {name: float(value)}
    if isinstance(value, Mapping):
        return {f"{name}[{k}]": float(v) for k, v in value.items() if isinstance(v, int | float)}
    return {}


def stage_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """A stage's headline metrics as numbers (a per-class dict becomes ``metric[class]``)."""
    found: dict[str, float] = {}
    for key in HEADLINE_METRICS:
        found.update(_numbers(key, metrics.get(key)))
    return found


@dataclass(frozen=True)
class RunMetrics:
    """One run in the comparison: its params and, per stage, its metric values, as the run recorded them."""

    run: RunInfo
    params: dict[str, Any]
    values: dict[str, dict[str, float]]  # stage -> metric -> value
    error: str = ""


def compare_runs(root: str, runs: Sequence[RunInfo]) -> list[RunMetrics]:
    """The headline metrics each run recorded, newest run first (a run without records says so)."""
    compared = []
    for run in runs:
        try:
            records = read_run(root, run.dag_id, run.run_id)
        except DagspecError as exc:
            compared.append(RunMetrics(run, {}, {}, str(exc).splitlines()[0]))
            continue
        if not records:
            why = (
                NOTHING_YET if run.state in ACTIVE_STATES else "no record of what this run ran (older than run records)"
            )
            compared.append(RunMetrics(run, {}, {}, why))
            continue
        params = next(iter(records.values())).run_params
        values = {name: found for name, r in records.items() if (found := stage_metrics(r.metrics))}
        compared.append(RunMetrics(run, dict(params), values))
    return compared


def differing_params(compared: Sequence[RunMetrics]) -> list[str]:
    """The params whose values are not the same in every run compared that recorded them."""
    recorded = [c for c in compared if not c.error]
    names = sorted({k for c in recorded for k in c.params})
    return [n for n in names if len({repr(c.params.get(n)) for c in recorded}) > 1]


def metric_names(compared: Sequence[RunMetrics]) -> list[str]:
    """Every metric some stage of some run recorded."""
    return sorted({m for c in compared for values in c.values.values() for m in values})
