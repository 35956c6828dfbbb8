"""The hook a trainer reports its progress to: rounds or epochs done of the total, and the metrics.

A trainer calls :func:`report_training` after each boosting round or epoch. The stage's job
(``dagspec.job.progress``) installs the receiver for the duration of the stage, in its own process
only: a trainer running in a Spark task (an executor, a barrier task) reports nothing here, its
tasks show as Spark progress. Nothing else lives here, on purpose: this module is in the
fingerprints of the kinds that import it, and how progress is shown (``dagspec.plan.progress``) is not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Literal

Unit = Literal["round", "epoch"]
# unit, done, total, the latest value of each metric
TrainingSink = Callable[[Unit, int, int, Mapping[str, float]], None]
_sink: TrainingSink | None = None
_sink_lock = threading.Lock()


def set_training_sink(sink: TrainingSink | None) -> None:
    """Install (or with None remove) the receiver of :func:`report_training` in this process."""
    global _sink
    with _sink_lock:
        _sink = sink


def report_training(unit: Unit, done: int, total: int, metrics: Mapping[str, float]) -> None:
    """A trainer's progress after a round or an epoch; nothing when no job listens (a test, a worker)."""
    sink = _sink
    if sink is not None:
        sink(unit, done, total, metrics)
