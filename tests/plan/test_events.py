"""The asset event summary of a stage: what the Assets page of the Airflow UI shows."""

from __future__ import annotations

import json

from dagspec.plan.events import asset_extra

READ_MANIFEST = {
    "stage": "raw",
    "kind": "read",
    "fingerprint": "abc123",
    "finished": "2026-12-03T18:00:00+00:00",
    "duration_s": 4.2,
    "rows": {"data": 990},
    "metrics": {"rows_read": 1000, "rows_rejected": 10, "rejected_fraction": 0.01, "files": 1},
}


def test_a_table_output_says_its_rows_and_the_stage_its_rejected_rows() -> None:
    extra = asset_extra(READ_MANIFEST, "data", "/store/d/raw/abc123/data")
    assert extra == {
        "stage": "raw",
        "kind": "read",
        "fingerprint": "abc123",
        "checkpoint": "/store/d/raw/abc123/data",
        "finished": "2026-12-03T18:00:00+00:00",
        "duration_s": 4.2,
        "rows_out": 990,
        "rows_rejected": 10,
    }
    # the quarantine is a files output: no row count of its own, the stage's rejected rows still shown
    assert "rows_out" not in asset_extra(READ_MANIFEST, "rejected", "/store/d/raw/abc123/rejected")


def test_models_and_evaluations_carry_their_headline_metrics_and_nothing_bulky() -> None:
    evaluation = {
        "stage": "eval",
        "kind": "evaluate",
        "fingerprint": "f1",
        "metrics": {"roc_auc": 0.91, "roc_auc_per_class": {"1": 0.91}, "log_loss": 0.31, "accuracy": 0.88,
                    "confusion": [[1, 2], [3, 4]], "train_time_s": 12.5, "peak_memory_mb": None},
    }  # fmt: skip
    extra = asset_extra(evaluation, "report", "/s/eval/f1/report")
    assert {k: extra[k] for k in ("roc_auc", "roc_auc_per_class", "log_loss", "accuracy", "train_time_s")} == {
        "roc_auc": 0.91,
        "roc_auc_per_class": {"1": 0.91},
        "log_loss": 0.31,
        "accuracy": 0.88,
        "train_time_s": 12.5,
    }
    assert "confusion" not in extra and "peak_memory_mb" not in extra
    model = {"stage": "m", "kind": "train_keras", "metrics": {"history": {"loss": [0.9, 0.5]}, "final_loss": 0.5}}
    assert asset_extra(model, "model", "/s/m/f/model")["final_loss"] == 0.5
    assert "history" not in asset_extra(model, "model", "/s/m/f/model")
    json.dumps(extra)  # Airflow stores it as JSON
