"""Reporting a running stage's progress (the model and the marker line: ``dagspec.plan.progress``).

The sources only update the latest state, cheaply, from whatever thread they run in: the Spark
Connect client's progress handler (``spark.registerProgressHandler``: per operation, every Spark
stage's tasks done of total and bytes read), training's rounds or epochs
(``dagspec.kinds.progress.report_training``). One daemon thread wakes once per interval, polls a
driver's status tracker when the stage has a driver of its own, and prints the latest state as one
marker line and writes it to ``<stage_dir>/_progress-<fingerprint>.json``. Lines of one stage are
therefore never closer than the interval; a stage that ends before the first interval prints none.
When it printed any, the job prints one last line marked ``finished`` and removes the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, TypeVar

from dagspec import storage
from dagspec.errors import StorageError
from dagspec.kinds.progress import Unit, set_training_sink
from dagspec.plan.progress import (
    DEFAULT_INTERVAL_S,
    ENABLED_VAR,
    INTERVAL_VAR,
    SparkWork,
    StageProgress,
    TrainingWork,
    progress_path,
)
from dagspec.plan.resolve import ResolvedStage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.shell.progress import ProgressHandler

log = logging.getLogger("dagspec.stage")


def progress_interval() -> float | None:
    """Seconds between two progress lines of a stage (``$DAGSPEC_PROGRESS_INTERVAL``), None when off."""
    if os.environ.get(ENABLED_VAR, "1").strip() == "0":
        return None
    text = os.environ.get(INTERVAL_VAR, "").strip()
    try:
        value = float(text) if text else DEFAULT_INTERVAL_S
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %s", INTERVAL_VAR, text, DEFAULT_INTERVAL_S)
        value = DEFAULT_INTERVAL_S
    return max(value, 0.5)


class _Rate:
    """Time left for ``total`` from the units done since the first one seen (None before a second one)."""

    def __init__(self) -> None:
        self.key: object = None
        self.t0 = 0.0
        self.done0 = 0

    def left(self, key: object, done: int, total: int, now: float) -> float | None:
        if key != self.key or done < self.done0:
            self.key, self.t0, self.done0 = key, now, done
            return None
        if done <= self.done0 or done >= total:
            return None
        return (now - self.t0) / (done - self.done0) * (total - done)


class ProgressReporter:
    """The latest progress of one stage, printed and written at most once per ``interval`` seconds."""

    def __init__(
        self, name: str, fingerprint: str, stage_dir: str, interval: float, out: IO[str] | None = None
    ) -> None:
        self.name, self.fingerprint = name, fingerprint
        self.interval = interval
        self.out = out or sys.stdout
        self.path = progress_path(stage_dir, fingerprint)
        self.started = time.monotonic()
        self.spark: SparkWork | None = None
        self.training: TrainingWork | None = None
        self.tracker: Any = None  # a driver's StatusTracker, polled by the thread
        self.handler: ProgressHandler | None = None  # a Connect client's progress handler
        self.printed = 0
        self._spark_at = self._training_at = 0.0  # when each was reported: its time left ages from there
        self._spark_rate, self._training_rate = _Rate(), _Rate()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dagspec-progress", daemon=True)

    def __call__(
        self, stages: Iterable[Any] | None, inflight_tasks: int, operation_id: str | None = None, done: bool = False
    ) -> None:
        """The Spark Connect client's progress handler (``pyspark.sql.connect.shell.progress``)."""
        if done:
            with self._lock:
                self.spark = None
            return
        known = [s for s in stages or () if s.num_tasks > 0]
        running = [s for s in known if not s.done]
        if not running:
            return
        current = max(running, key=lambda s: s.stage_id)
        self._set_spark(
            current.stage_id,
            current.num_completed_tasks,
            current.num_tasks,
            inflight_tasks,
            sum(s.num_bytes_read for s in known),
        )

    def attach(self, session: SparkSession) -> None:
        """Report the work of another Connect session of this stage too (a partition's sibling session:
        ``dagspec.job.partitions``); a driver's sessions share its status tracker already."""
        if self.handler is not None:
            session.registerProgressHandler(self.handler)

    def on_training(self, unit: Unit, done: int, total: int, metrics: Mapping[str, float]) -> None:
        """A trainer's round or epoch (``dagspec.kinds.progress.report_training``)."""
        left = self._training_rate.left(unit, done, total, time.monotonic())
        work = TrainingWork(
            unit=unit,
            done=done,
            total=total,
            metrics={k: round(float(v), 6) for k, v in metrics.items()},
            left_s=_rounded(left),
        )
        with self._lock:
            self.training = work
            self._training_at = time.monotonic()

    def _set_spark(self, stage_id: int, done: int, total: int, running: int, read: int | None) -> None:
        left = self._spark_rate.left(stage_id, done, total, time.monotonic())
        work = SparkWork(
            spark_stage=stage_id,
            tasks_done=done,
            tasks_total=total,
            running=running,
            bytes_read=read,
            left_s=_rounded(left),
        )
        with self._lock:
            self.spark = work
            self._spark_at = time.monotonic()

    def _poll_tracker(self) -> None:
        tracker = self.tracker
        if tracker is None:
            return
        infos = [info for info in (tracker.getStageInfo(i) for i in tracker.getActiveStageIds()) if info is not None]
        if not infos:
            with self._lock:
                self.spark = None
            return
        current = max(infos, key=lambda info: info.stageId)
        running = sum(info.numActiveTasks for info in infos)
        self._set_spark(current.stageId, current.numCompletedTasks, current.numTasks, running, None)

    def snapshot(self, *, finished: bool = False) -> StageProgress | None:
        """The latest progress, or None when no source has reported anything running."""
        with self._lock:
            spark, training = self.spark, self.training
            spark_at, training_at = self._spark_at, self._training_at
        if spark is None and training is None and not finished:
            return None
        now = time.monotonic()
        return StageProgress(
            stage=self.name,
            fingerprint=self.fingerprint,
            elapsed_s=round(now - self.started, 3),
            updated=datetime.now(UTC).isoformat(timespec="seconds"),
            spark=None if finished else _aged(spark, now - spark_at),
            training=_aged(training, now - training_at),
            finished=finished,
        )

    def emit(self, progress: StageProgress) -> None:
        """Print the marker line; keep it beside the checkpoints unless it is the last one."""
        self.out.write(progress.marker_line() + "\n")  # one write: no other thread's output inside the line
        self.out.flush()
        self.printed += 1
        with contextlib.suppress(OSError, StorageError):  # a courtesy to the UI: the line is the report
            if progress.finished:
                storage.delete(self.path)
            else:
                storage.write_text(self.path, progress.model_dump_json(exclude_none=True))

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(max(0.0, last + self.interval - time.monotonic())):
            try:
                self._poll_tracker()
            except Exception as exc:  # py4j: the driver stopping under the poll; the stage decides, not this
                log.debug("progress: status tracker: %s", exc)
            progress = self.snapshot()
            if progress is not None:
                self.emit(progress)
            last = time.monotonic()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread; a stage that printed progress prints its ``finished`` line."""
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)
        if self.printed:
            last = self.snapshot(finished=True)
            if last is not None:
                self.emit(last)


_Work = TypeVar("_Work", SparkWork, TrainingWork)


def _aged(work: _Work | None, age: float) -> _Work | None:
    """``work`` as of now: its time left less the time since it was reported."""
    if work is None or work.left_s is None:
        return work
    return work.model_copy(update={"left_s": round(max(0.0, work.left_s - age), 1)})


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def _connect_handler(reporter: ProgressReporter) -> ProgressHandler:
    from pyspark.sql.connect.shell.progress import ProgressHandler

    class Handler(ProgressHandler):
        def __call__(
            self, stages: Iterable[Any] | None, inflight_tasks: int, operation_id: str | None, done: bool
        ) -> None:
            reporter(stages, inflight_tasks, operation_id, done)

    return Handler()


@contextlib.contextmanager
def watch_progress(spark: SparkSession, stage: ResolvedStage, *, connect: bool) -> Iterator[ProgressReporter | None]:
    """Report the stage's progress while the block runs (nothing with ``$DAGSPEC_PROGRESS=0``)."""
    interval = progress_interval()
    if interval is None:
        yield None
        return
    reporter = ProgressReporter(stage.name, stage.fingerprint, stage.stage_dir, interval)
    handler = reporter.handler = _connect_handler(reporter) if connect else None
    if handler is not None:
        spark.registerProgressHandler(handler)
    else:
        reporter.tracker = spark.sparkContext.statusTracker()
    set_training_sink(reporter.on_training)
    reporter.start()
    try:
        yield reporter
    finally:
        set_training_sink(None)
        if handler is not None:
            with contextlib.suppress(Exception):  # a dead server: the stage's failure says so
                spark.removeProgressHandler(handler)
        reporter.stop()
