"""train_spark_ml on the real Criteo sample: its model card, and evaluate scoring through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagspec.kinds.model_card import read_model_card
from tests.conftest import CRITEO_SAMPLE
from tests.helpers import load_and_run, manifest, spec_reading

pytestmark = pytest.mark.spark


def test_logistic_regression_writes_a_card_that_evaluate_reads(spark, home, tmp_path: Path) -> None:
    spec = spec_reading(
        tmp_path / "pipelines",
        CRITEO_SAMPLE,
        """
        hashed: {kind: ctr_features, inputs: {data: raw}, params: {mode: hashed, hash_bits: 10}}
        lr: {kind: train_spark_ml, inputs: {train: hashed}, params: {model: logistic_regression, max_iter: 5}}
        scores: {kind: evaluate, inputs: {model: lr, data: hashed}}
        """,
        read="format: criteo",
    )
    plan = load_and_run(spark, spec)
    card = read_model_card(Path(plan["lr"].output_path("model")))
    assert (card.flavor, card.kind, card.task, card.classes) == ("spark_ml", "train_spark_ml", "binary", [0, 1])
    assert card.params["max_iter"] == 5 and card.train_time_s is not None and card.train_time_s > 0
    assert card.trained_on["train"].fingerprint == plan["hashed"].fingerprint
    assert card.probability_col and card.input_columns == ["features"]
    metrics = json.loads((Path(plan["scores"].output_path("report")) / "metrics.json").read_text())
    assert metrics["flavor"] == "spark_ml" and metrics["rows"] == manifest(plan["hashed"])["rows"]["data"]
    assert metrics["train_time_s"] == card.train_time_s  # evaluate copies the card's training time
