"""What a successful ``dagspec run`` did: per stage ``hit`` or ``ran``, and where its exports were published.

A stage ran in this run when its committed manifest says it started after the run did: the
manifest is written by the stage's own job (a Connect client or a spark-submit driver started
from this machine), so both times come from this machine's clock. Otherwise its task found the
checkpoint committed and ran nothing (the operator logs ``checkpoint hit: <dir>; nothing to run``).
Nothing extra is passed through Airflow: the manifests are read once the run is over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dagspec import checkpoint
from dagspec.errors import DagspecError
from dagspec.local.project import display
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.plan.resolved import PARTITIONS_DIR
from dagspec.spec.models import PipelineSpec


def _shown(path: str, home: Path) -> str:
    return path if "://" in path else display(Path(path), home)


@dataclass(frozen=True)
class Outcome:
    """One stage of a finished run: did it compute, its checkpoint, where it published (exports)."""

    ran: bool
    checkpoint: str
    published: str | None = None
    partitions: tuple[int, int] | None = None  # a partitioned stage: (computed in the run, partitions read)


def stage_outcomes(spec: PipelineSpec, overrides: Mapping[str, Any], started: float) -> dict[str, Outcome] | None:
    """Per stage, what the run that started at ``started`` (epoch seconds) did; None when the plan
    cannot be resolved outside the run (params that depend on it, such as ``ds``)."""
    try:
        plan = resolve_pipeline(spec, default_context(spec, overrides))
    except DagspecError:
        return None
    since = datetime.fromtimestamp(started, UTC)
    outcomes = {}
    for name, stage in plan.items():
        if stage.partitioned:  # ran: any of its partitions computed in this run
            ran_keys = [k for k, part in stage.partitions.items() if _began_since(part.checkpoint.manifest(), since)]
            where = f"{stage.stage_dir}/{PARTITIONS_DIR}"
            outcomes[name] = Outcome(bool(ran_keys), where, None, (len(ran_keys), len(stage.partitions)))
            continue
        ran = _began_since(stage.checkpoint.manifest(), since)
        published = stage.publish_path
        if published is not None and checkpoint.published_fingerprint(published) != stage.fingerprint:
            published = None
        outcomes[name] = Outcome(ran, stage.checkpoint_dir, published)
    return outcomes


def _began_since(manifest: Mapping[str, Any] | None, since: datetime) -> bool:
    began = str((manifest or {}).get("started", ""))
    return bool(began) and datetime.fromisoformat(began) >= since


def task_line(task_id: str, state: str, duration: float, outcome: Outcome | None, home: Path) -> str:
    """One line of the run's table: ``ran`` with its duration, or ``hit`` with the checkpoint it found."""
    if outcome is None or state != "success":
        return f"  {task_id:24} {state:16} {duration:7.1f} s"
    if outcome.partitions is not None:
        ran, total = outcome.partitions
        return f"  {task_id:24} {'ran' if ran else 'hit':6} {duration:7.1f} s  partitions: {ran} computed of {total}"
    if outcome.ran:
        return f"  {task_id:24} {'ran':6} {duration:7.1f} s"
    return f"  {task_id:24} {'hit':6} {duration:7.1f} s  {_shown(outcome.checkpoint, home)}"


def counts(outcomes: Mapping[str, Outcome]) -> str:
    """``5 stages: 1 ran, 4 hits``."""
    ran = sum(o.ran for o in outcomes.values())
    hits = len(outcomes) - ran
    return f"{len(outcomes)} stages: {ran} ran, {hits} hit{'' if hits == 1 else 's'}"


def result_lines(outcomes: Mapping[str, Outcome], home: Path) -> list[str]:
    """Where the run's results are: each export's published folder, each report (``*.md`` in a files output)."""
    lines = [f"  {name:24} {_shown(o.published, home)}" for name, o in outcomes.items() if o.published]
    lines = ["published (exports):", *lines] if lines else []
    reports = [
        f"  {name:24} {_shown(str(report), home)}"
        for name, o in outcomes.items()
        if "://" not in o.checkpoint
        for report in sorted(Path(o.checkpoint).glob("*/*.md"))
    ]
    return lines + (["reports:", *reports] if reports else [])
