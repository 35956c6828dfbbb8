"""A running stage's progress: the marker line, the reporter's throttle and file, its real sources.

The sources are real: XGBoost's boosting rounds through the trainer's callback, a driver's status
tracker during a Spark job of many partitions. (Over Spark Connect, and through `dagspec run`:
tests/local/test_run_progress.py.)
"""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from dagspec.job.progress import ProgressReporter, progress_interval
from dagspec.kinds.progress import set_training_sink
from dagspec.kinds.training.train_xgboost import progress_callback
from dagspec.local.progress_view import ProgressView
from dagspec.plan.failure import StageFailure, find_failures
from dagspec.plan.progress import (
    MARKER,
    SparkWork,
    StageProgress,
    TrainingWork,
    find_progress,
    progress_path,
    read_progress,
)

INTERVAL = 0.5


def _lines(out: io.StringIO) -> list[StageProgress]:
    return find_progress(out.getvalue().splitlines())


def _assert_throttled(lines: list[StageProgress], interval: float) -> None:
    """No two progress lines of the run closer than the interval, on the job's own clock."""
    running = [p.elapsed_s for p in lines if not p.finished]
    # elapsed_s is rounded to the millisecond: two lines one interval apart may read 0.001 s closer
    assert all(b - a >= interval - 0.0011 for a, b in itertools.pairwise(running)), running


def test_a_marker_line_survives_a_log_line_and_never_reads_as_a_failure() -> None:
    progress = StageProgress(
        stage="xgb",
        fingerprint="0123456789abcdef",
        elapsed_s=12.5,
        updated="2026-12-05T01:00:00+00:00",
        training=TrainingWork(unit="round", done=40, total=200, metrics={"validation-logloss": 0.5312}, left_s=30),
        spark=SparkWork(spark_stage=7, tasks_done=3, tasks_total=8, running=2, bytes_read=3 * 2**20),
    )
    # how Airflow's task log wraps a line of the job's output
    logged = f"2026-12-05T01:00:00Z [info     ] {progress.marker_line()} [airflow.task.operators] loc=operator.py:200"
    assert find_progress([logged, "an unrelated line", f"{MARKER}{{not json"]) == [progress]
    assert find_failures([logged]) == []
    assert find_progress([StageFailure("xgb", "train_xgboost", "boom").marker_line()]) == []
    text = progress.text()
    assert text.startswith("round 40/200 validation-logloss=0.5312, ~30 s left | spark stage 7: 3/8 tasks, 2 running")
    assert "3.0 MiB read" in text


def test_the_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGSPEC_PROGRESS_INTERVAL", raising=False)
    assert progress_interval() == 10.0
    monkeypatch.setenv("DAGSPEC_PROGRESS_INTERVAL", "2.5")
    assert progress_interval() == 2.5
    monkeypatch.setenv("DAGSPEC_PROGRESS", "0")
    assert progress_interval() is None


def test_xgboost_rounds_are_reported_throttled_kept_in_a_file_and_closed(tmp_path: Path) -> None:
    import xgboost as xgb

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 8))
    y = (x[:, 0] + rng.normal(size=2000) > 0).astype(int)
    data = xgb.DMatrix(x, label=y)
    out = io.StringIO()
    reporter = ProgressReporter("xgb", "f" * 16, str(tmp_path), INTERVAL, out)
    set_training_sink(reporter.on_training)
    reporter.start()
    params = {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 4, "nthread": 1}
    booster, total, seen_file = None, 100_000, None
    try:
        # train on, a few rounds at a time, until the reporter has printed three lines
        while reporter.printed < 3 and (booster is None or booster.num_boosted_rounds() < total):
            booster = xgb.train(
                params,
                data,
                num_boost_round=20,
                evals=[(data, "train")],
                xgb_model=booster,
                callbacks=[progress_callback(total)],
                verbose_eval=False,
            )
            seen_file = read_progress(str(tmp_path), "f" * 16) or seen_file
    finally:
        set_training_sink(None)
        reporter.stop()
    lines = _lines(out)
    assert len([p for p in lines if not p.finished]) >= 3
    _assert_throttled(lines, INTERVAL)
    rounds = [p.training.done for p in lines if p.training is not None and not p.finished]
    assert rounds == sorted(rounds) and rounds[0] >= 1
    first = next(p.training for p in lines if p.training is not None)
    assert first.unit == "round" and first.total == total and set(first.metrics) == {"train-logloss"}
    assert lines[-1].finished and lines[-1].stage == "xgb"
    assert seen_file is not None and seen_file.training is not None  # what a UI reads while it runs
    assert not Path(progress_path(str(tmp_path), "f" * 16)).exists()  # gone once the stage ended


@pytest.mark.spark
def test_a_drivers_status_tracker_reports_the_running_spark_stage(spark, tmp_path: Path) -> None:
    out = io.StringIO()
    reporter = ProgressReporter("wide", "a" * 16, str(tmp_path), INTERVAL, out)
    reporter.tracker = spark.sparkContext.statusTracker()
    reporter.start()
    try:
        # a job of many small tasks on two cores, run again until the reporter has seen it running
        for _ in range(20):
            spark.range(0, 4_000_000, numPartitions=300).selectExpr("sum(id * id % 7)").collect()
            if any(p.spark is not None and p.spark.tasks_total == 300 for p in _lines(out)):
                break
    finally:
        reporter.stop()
    lines = _lines(out)
    seen = [p.spark for p in lines if p.spark is not None and p.spark.tasks_total == 300]
    assert seen, out.getvalue()
    assert all(0 <= s.tasks_done <= 300 and s.bytes_read is None for s in seen)
    _assert_throttled(lines, INTERVAL)
    assert json.loads(out.getvalue().splitlines()[-1].removeprefix(MARKER))["finished"] is True


def _progress(stage: str, elapsed: float, done: int, *, finished: bool = False) -> StageProgress:
    work = TrainingWork(unit="epoch", done=done, total=10, metrics={"val_loss": 0.3})
    return StageProgress(
        stage=stage, fingerprint="0" * 16, elapsed_s=elapsed, updated="-", training=work, finished=finished
    )


def test_the_plain_view_prints_each_line_and_the_live_view_redraws_one_line_per_stage() -> None:
    plain = io.StringIO()
    view = ProgressView(plain, live=False)
    for p in (
        _progress("a", 10, 1),
        _progress("b", 10, 2),
        _progress("a", 20, 3),
        _progress("a", 21, 3, finished=True),
    ):
        view.show(p)
    assert plain.getvalue().splitlines() == [
        "progress  a                    [   10 s] epoch 1/10 val_loss=0.3",
        "progress  b                    [   10 s] epoch 2/10 val_loss=0.3",
        "progress  a                    [   20 s] epoch 3/10 val_loss=0.3",
    ]
    live = io.StringIO()
    view = ProgressView(live, live=True)
    view.show(_progress("a", 10, 1))
    view.show(_progress("b", 10, 2))
    assert view.running.keys() == {"a", "b"} and view.drawn == 2
    view.show(_progress("a", 21, 3, finished=True))
    assert list(view.running) == ["b"] and view.drawn == 1
    view.close()
    assert view.drawn == 0
    # each redraw goes back over the block it drew before (cursor up, line cleared)
    assert "\x1b[2F" in live.getvalue() and live.getvalue().count("\x1b[2K") >= 5
