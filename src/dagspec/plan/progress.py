"""The progress of a running stage: what it reports, the marker line it prints, the file it keeps.

A stage's job (``dagspec.job.progress``) prints its latest progress as one marker line
(``dagspec-progress: {json}``) at most once per interval and keeps it in
``<stage_dir>/_progress-<fingerprint>.json`` while it runs. The lines reach the Airflow task log
through the job's output like any other line; ``dagspec run`` finds them in its run log
(:func:`find_progress`) and the UI reads the file (:func:`read_progress`). Both sides read one
model, :class:`StageProgress`.

Where it comes from: Spark (the Connect client's progress handler, or a driver's status tracker):
tasks done of the total of the running Spark stage; training (``dagspec.kinds.progress``, called
by a trainer after each boosting round or epoch): rounds or epochs done of the total, with the
current metrics. The estimate of what is left is made only from those counts: the running Spark
stage's tasks, or the remaining rounds at the rate measured so far.

Only pydantic: the job, ``dagspec run`` and the Airflow UI read it. Kinds do not import it (their
code is in their fingerprints; how progress is shown is not): a trainer calls the hook in
``dagspec.kinds.progress``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from dagspec import storage

MARKER = "dagspec-progress: "
PROGRESS_PREFIX = "_progress-"
INTERVAL_VAR = "DAGSPEC_PROGRESS_INTERVAL"  # seconds between two lines of one stage (default 10)
ENABLED_VAR = "DAGSPEC_PROGRESS"  # "0": no progress at all (no thread, no handler, no file)
DEFAULT_INTERVAL_S = 10.0


class SparkWork(BaseModel):
    """The running Spark stage of the stage's current Spark job (its tasks), and the bytes read so far."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spark_stage: int
    tasks_done: int
    tasks_total: int
    running: int = 0
    bytes_read: int | None = None  # Spark Connect reports it; a driver's status tracker does not
    left_s: float | None = None  # for this Spark stage, from its tasks done so far


class TrainingWork(BaseModel):
    """Boosting rounds or epochs done of the total, and the latest value of each metric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unit: Literal["round", "epoch"]
    done: int
    total: int
    metrics: dict[str, float] = {}
    left_s: float | None = None  # the remaining rounds at the rate measured in this attempt


class StageProgress(BaseModel):
    """One stage's latest progress; ``finished``: the last line of a stage that ended."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: str
    fingerprint: str
    elapsed_s: float  # since the job started, on the job's clock: two lines' difference is their spacing
    updated: str  # ISO time of this line
    spark: SparkWork | None = None
    training: TrainingWork | None = None
    finished: bool = False

    def text(self) -> str:
        """One line for a person: ``round 40/200 validation-logloss=0.5312, ~12 s left | spark stage 7: 3/8 tasks``."""
        parts = []
        if self.training is not None:
            t = self.training
            metrics = " ".join(f"{name}={value:.4g}" for name, value in t.metrics.items())
            parts.append(f"{t.unit} {t.done}/{t.total}{' ' + metrics if metrics else ''}{_left(t.left_s)}")
        if self.spark is not None:
            s = self.spark
            read = f", {_size(s.bytes_read)} read" if s.bytes_read else ""
            parts.append(
                f"spark stage {s.spark_stage}: {s.tasks_done}/{s.tasks_total} tasks, {s.running} running"
                f"{read}{_left(s.left_s)}"
            )
        if self.finished:
            parts.append("finished")
        return " | ".join(parts) or "working"

    def marker_line(self) -> str:
        """The line the job prints (the human text is derived from the JSON, so only the JSON travels)."""
        return MARKER + self.model_dump_json(exclude_none=True)


def _left(seconds: float | None) -> str:
    if seconds is None or seconds < 1:
        return ""
    return f", ~{seconds:.0f} s left" if seconds < 120 else f", ~{seconds / 60:.0f} min left"


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def find_progress(lines: Iterable[str]) -> list[StageProgress]:
    """Every progress marker in ``lines``, in order (a log line may carry a prefix and a suffix:
    timestamps, logger names)."""
    found = []
    for line in lines:
        at = line.find(MARKER)
        if at < 0:
            continue
        with contextlib.suppress(ValueError, ValidationError):
            data, _ = json.JSONDecoder().raw_decode(line[at + len(MARKER) :])
            found.append(StageProgress.model_validate(data))
    return found


def progress_path(stage_dir: str, fingerprint: str) -> str:
    """The running attempt's latest progress, beside the stage's checkpoints (no checkpoint: ``_``)."""
    return storage.join_under(stage_dir, f"{PROGRESS_PREFIX}{fingerprint}.json")


def read_progress(stage_dir: str, fingerprint: str) -> StageProgress | None:
    """The latest progress a running attempt of ``fingerprint`` wrote, or None."""
    with contextlib.suppress(OSError, ValueError, ValidationError):
        text = storage.read_text(progress_path(stage_dir, fingerprint))
        return StageProgress.model_validate_json(text) if text else None
    return None
