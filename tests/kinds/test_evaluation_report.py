"""The evaluation report: what evaluate writes into metrics.json and what gate, report and compare read."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dagspec.errors import StageFailedError
from dagspec.kinds.ctr import report as ctr_report
from dagspec.kinds.evaluation_report import EvaluationReport, read_evaluation_report
from dagspec.kinds.quality import gate
from dagspec.kinds.scoring import compare
from tests.kinds.reports import evaluation_report

# every reader of metrics.json, as its kind calls it
READERS: dict[str, Callable[[Path], Any]] = {
    "gate": lambda folder: gate.read_report(str(folder), "eval"),
    "report": lambda folder: ctr_report.read_report(str(folder)),
    "compare": lambda folder: compare._read_report("xgb", str(folder)),
}


def test_a_report_reads_back_as_written(tmp_path: Path) -> None:
    written = evaluation_report((0, 1, 2), roc_auc_ci=[0.88, 0.92], log_loss=float("nan"))
    written.write(tmp_path)
    raw = json.loads((tmp_path / "metrics.json").read_text())
    assert raw["report_version"] == 1 and raw["roc_auc_ci"] == [0.88, 0.92] and raw["per_class"]["2"]["support"] == 700
    read = read_evaluation_report(tmp_path)
    assert read.model_dump(exclude={"log_loss"}) == written.model_dump(exclude={"log_loss"})
    assert math.isnan(read.log_loss)
    assert read.value("roc_auc") == 0.9 and read.interval("roc_auc") == (0.88, 0.92)
    assert read.per_class_values("recall") == {"0": 0.86, "1": 0.86, "2": 0.86}


def test_a_report_without_a_version_is_refused_by_every_reader(tmp_path: Path) -> None:
    old = evaluation_report().model_dump()
    del old["report_version"]
    (tmp_path / "metrics.json").write_text(json.dumps(old))  # as evaluate wrote it before reports were versioned
    for who, read in READERS.items():
        with pytest.raises(StageFailedError) as refused:
            read(tmp_path)
        message = str(refused.value)
        assert message.endswith(
            "/metrics.json was written before evaluation reports were versioned (no report_version); this dagspec "
            "reads report_version 1: run its evaluate stage again (dagspec run SPEC --force, or remove the checkpoint)"
        ), who
        assert str(tmp_path) in message, who


def test_a_newer_report_is_refused_by_every_reader(tmp_path: Path) -> None:
    newer = {**evaluation_report().model_dump(), "report_version": 2, "brier_score": 0.1}
    (tmp_path / "metrics.json").write_text(json.dumps(newer))
    for read in READERS.values():
        with pytest.raises(
            StageFailedError,
            match=r"/metrics\.json has report_version 2, newer than this dagspec reads \(report_version 1\): upgrade "
            r"dagspec, or run its evaluate stage again \(dagspec run SPEC --force, or remove the checkpoint\) with "
            r"this one$",
        ):
            read(tmp_path)
    with pytest.raises(StageFailedError, match=rf"^gate: input 'eval': {tmp_path}/metrics\.json has report_version 2"):
        READERS["gate"](tmp_path)
    with pytest.raises(StageFailedError, match=rf"^input 'xgb': {tmp_path}/metrics\.json has report_version 2"):
        READERS["compare"](tmp_path)


def test_an_invalid_report_names_the_file_and_the_key(tmp_path: Path) -> None:
    bad = {**evaluation_report().model_dump(), "rows": "many", "flavour": "xgboost"}
    (tmp_path / "metrics.json").write_text(json.dumps(bad))
    with pytest.raises(
        StageFailedError,
        match=r"metrics\.json is not a valid evaluation report: rows: Input should be a valid integer.*; "
        r"flavour: Extra inputs are not permitted",
    ):
        read_evaluation_report(tmp_path)
    with pytest.raises(StageFailedError, match=r"^eval is not an evaluate report: no metrics\.json$"):
        read_evaluation_report(tmp_path / "none", shown_as="eval")


def test_the_report_model_is_the_one_contract() -> None:
    # the readers hold no list of keys of their own: the table and the gate read the model's fields
    assert {"roc_auc", "log_loss", "train_time_s", "peak_memory_mb", "cpu_load"} <= set(EvaluationReport.model_fields)
    assert ctr_report.table_row(evaluation_report(train_time_s=2.0))["Train time"] == 2.0
