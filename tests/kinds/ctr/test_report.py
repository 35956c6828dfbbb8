"""The report kind on real evaluate-style report directories (no Spark needed)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from dagspec.errors import StageFailedError
from dagspec.kinds.base import StageContext
from dagspec.kinds.ctr import published as seed
from dagspec.kinds.ctr.report import ReportParams, report
from tests.kinds.reports import evaluation_report


def _ctx(tmp_path: Path) -> StageContext:
    return StageContext(
        spark=None,  # type: ignore[arg-type]
        dag_id="d",
        stage_name="report",
        fingerprint="f" * 16,
        home=tmp_path,
        storage_root=str(tmp_path),
        work_dir=str(tmp_path / "work"),
        scratch_root=str(tmp_path / "scratch"),
    )


def _evaluation(folder: Path, auc: float, loss: float, seconds: float, **changes: object) -> str:
    folder.mkdir(parents=True)
    evaluation_report(
        roc_auc=auc, log_loss=loss, train_time_s=seconds, peak_memory_mb=300.0, cpu_load=1.5, **changes
    ).write(folder)
    return str(folder)


def test_report_writes_the_benchmark_table_and_plots(tmp_path: Path) -> None:
    inputs = {
        "xgb__1000": _evaluation(tmp_path / "a", 0.70, 0.14, 1.0),
        "xgb__10000": _evaluation(tmp_path / "b", 0.75, 0.13, 3.0),
        "lr_small": _evaluation(tmp_path / "c", 0.68, 0.15, 2.0),
        "rf__1000": _evaluation(tmp_path / "d", 0.71, 0.14, 9.0),
    }
    params = ReportParams.model_validate(
        {"points": {"lr_small": ["lr", "1000"]}, "engines": "['xgb', 'lr']"}  # as Jinja renders a list
    )
    ctx = _ctx(tmp_path)
    report(inputs, params, ctx)
    out = Path(ctx.output_path("report"))
    with (out / "metrics.tsv").open() as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    assert rows[0] == ["Engine", "Train size", "ROC AUC", "Log loss", "Train time", "Maximum memory", "CPU load"]
    assert rows[1:] == [
        ["lr", "1000", "0.68", "0.15", "2.0", "300.0", "1.5"],
        ["xgb", "1000", "0.7", "0.14", "1.0", "300.0", "1.5"],
        ["xgb", "10000", "0.75", "0.13", "3.0", "300.0", "1.5"],
    ]  # rf filtered out by engines
    for png in ("auc.png", "log_loss.png", "train_time.png", "memory.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert ctx.metrics["engines"] == ["lr", "xgb"]
    # what the plots draw: each engine's points by size, and the published curve on AUC and log loss
    curves = json.loads((out / "curves.json").read_text())
    assert curves["ROC AUC"]["xgb"] == [[1000, 0.7], [10000, 0.75]]
    assert curves["Train time"] == {"lr": [[1000, 2.0]], "xgb": [[1000, 1.0], [10000, 3.0]]}
    # the published curves of the engines shown (xgb, lr), not of rf (filtered out) nor vw (not run)
    xgb, lr = (next(c for c in seed.CURVES if c.engine == name) for name in ("xgb", "lr"))
    assert sorted(name for name in curves["ROC AUC"] if name in seed.LABELS) == sorted([xgb.label, lr.label])
    assert curves["ROC AUC"][xgb.label] == [[size, auc] for size, auc in xgb.roc_auc]
    assert curves["Log loss"][lr.label] == [[size, loss] for size, loss in lr.log_loss]
    assert curves["ROC AUC"][xgb.label][-1] == [10_000_000, 0.7507] and len(curves["Log loss"][xgb.label]) == 7


def test_report_draws_the_published_curve_of_every_engine_that_has_one(tmp_path: Path) -> None:
    inputs = {
        f"{engine}__10000": _evaluation(tmp_path / engine, 0.7, 0.14, 1.0, roc_auc_ci=[0.68, 0.72])
        for engine in ("xgb_single", "xgb_spark", "vw", "lr", "rf", "mine")
    }
    ctx = _ctx(tmp_path)
    report(inputs, ReportParams(), ctx)
    curves = json.loads((Path(ctx.output_path("report")) / "curves.json").read_text())
    for column in ("ROC AUC", "Log loss"):  # xgb_single and xgb_spark share XGBoost's; mine has none
        assert {name for name in curves[column] if name in seed.LABELS} == seed.LABELS
        assert len(seed.LABELS) == 4
    assert curves["ROC AUC interval"]["vw"] == [[10000, 0.68, 0.72]]  # the run's interval beside them
    assert {name for name in curves["Train time"] if name in seed.LABELS} == set()


def test_report_without_the_published_curve(tmp_path: Path) -> None:
    inputs = {"xgb__1000": _evaluation(tmp_path / "a", 0.70, 0.14, 1.0)}
    ctx = _ctx(tmp_path)
    report(inputs, ReportParams(published=False), ctx)
    curves = json.loads((Path(ctx.output_path("report")) / "curves.json").read_text())
    assert {column: list(series) for column, series in curves.items()} == {
        "ROC AUC": ["xgb"],
        "Log loss": ["xgb"],
        "Train time": ["xgb"],
        "Maximum memory": ["xgb"],
    }


def test_report_draws_the_intervals_as_error_bars(tmp_path: Path) -> None:
    small = _evaluation(tmp_path / "a", 0.70, 0.14, 1.0, roc_auc_ci=[0.66, 0.74], log_loss_ci=[0.13, 0.15])
    inputs = {"xgb__1000": small, "xgb__10000": _evaluation(tmp_path / "b", 0.75, 0.13, 3.0)}
    ctx = _ctx(tmp_path)
    report(inputs, ReportParams(published=False), ctx)
    out = Path(ctx.output_path("report"))
    curves = json.loads((out / "curves.json").read_text())
    # only the point with an interval has one; the table keeps the benchmark's columns
    assert curves["ROC AUC interval"] == {"xgb": [[1000, 0.66, 0.74]]}
    assert curves["Log loss interval"] == {"xgb": [[1000, 0.13, 0.15]]}
    header = (out / "metrics.tsv").read_text().splitlines()[0].split("\t")
    assert header == ["Engine", "Train size", "ROC AUC", "Log loss", "Train time", "Maximum memory", "CPU load"]
    assert (out / "auc.png").read_bytes()[:4] == b"\x89PNG"


def test_report_role_without_a_point_is_refused(tmp_path: Path) -> None:
    inputs = {"xgb": _evaluation(tmp_path / "a", 0.7, 0.1, 1.0)}
    with pytest.raises(StageFailedError, match=r"name it <engine>__<train size>"):
        report(inputs, ReportParams(), _ctx(tmp_path))
