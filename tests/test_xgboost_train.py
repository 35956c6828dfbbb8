"""train_xgboost in both modes on the real Criteo sample, inference through model_xgboost."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dagspec.errors import StageFailedError
from tests.conftest import CRITEO_SAMPLE
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark

SMALL = "num_round: 12, checkpoint_every: 5, min_child_weight: 1, lambda: 1, gamma: 0"


def _spec(tmp_path: Path, train_params: str) -> Path:
    return write_spec(
        tmp_path / "pipelines",
        f"""
        stages:
          raw: {{kind: read, params: {{format: criteo, path: "{CRITEO_SAMPLE}"}}}}
          hashed: {{kind: ctr_features, inputs: {{data: raw}}, params: {{mode: hashed, hash_bits: 12, log1p: true}}}}
          as_is: {{kind: ctr_features, inputs: {{data: raw}}, params: {{mode: as_is}}}}
          {train_params}
        """,
    )


def _model_dir(stage) -> Path:
    return Path(stage.output_path("model"))


def _predict(spark, stage, data_stage) -> tuple[dict, object]:
    from dagspec.stages.model_io import transform_with_model

    meta = json.loads((_model_dir(stage) / "model.json").read_text())
    df = spark.read.parquet(data_stage.output_path("data"))
    return meta, transform_with_model(spark, str(_model_dir(stage)), df, ["label"])


def test_single_node_hashed_and_as_is_match_python_xgboost(spark, home, tmp_path: Path) -> None:
    import xgboost as xgb

    spec = _spec(
        tmp_path,
        f"""
          xgb_h: {{kind: train_xgboost, inputs: {{train: hashed}}, params: {{{SMALL}}}}}
          xgb_a: {{kind: train_xgboost, inputs: {{train: as_is, validation: as_is}}, params: {{{SMALL}}}}}
          xgb_s: {{kind: train_xgboost, inputs: {{train: as_is}}, params: {{{SMALL}, in_memory_max_mb: 0, batch_rows: 300}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    # streamed in 300-row batches through the DataIter: the same model as the one-piece load
    assert manifest(plan["xgb_a"])["metrics"]["train_data"] == "memory"
    assert manifest(plan["xgb_s"])["metrics"]["train_data"] == "stream"
    _, in_memory = _predict(spark, plan["xgb_a"], plan["as_is"])
    _, streamed = _predict(spark, plan["xgb_s"], plan["as_is"])
    # scoring is a map over the same Parquet partitions: rows come back in the same order
    p_memory = np.array([r["probability"][1] for r in in_memory.collect()])
    p_stream = np.array([r["probability"][1] for r in streamed.collect()])
    np.testing.assert_allclose(p_stream, p_memory, atol=1e-6)
    for name, data in (("xgb_h", "hashed"), ("xgb_a", "as_is")):
        meta, predictions = _predict(spark, plan[name], plan[data])
        assert meta["flavor"] == "xgboost" and meta["rounds"] == 12 and meta["resumed_from_round"] == 0
        assert meta["train_time_s"] > 0 and meta["peak_memory_mb"] > 0 and meta["cpu_load"] >= 0
        rows = predictions.collect()
        assert len(rows) == 1000
        probs = np.array([r["probability"] for r in rows])
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-9)
        assert {r["prediction"] for r in rows} <= {0, 1}
        # the committed booster, loaded by plain xgboost, scores the same rows the same way
        booster = xgb.Booster(model_file=str(_model_dir(plan[name]) / meta["artifact"]))
        assert booster.num_boosted_rounds() == 12
        if name == "xgb_a":
            frame = spark.read.parquet(plan[data].output_path("data")).toPandas()
            expected = booster.predict(xgb.DMatrix(frame[meta["input_columns"]].astype("float32")))
            got = np.array([r["probability"][1] for r in predictions.collect()])
            np.testing.assert_allclose(np.sort(got), np.sort(expected), rtol=1e-5)
        labels = np.array([r["label"] for r in rows])
        auc_like = probs[labels == 1, 1].mean() - probs[labels == 0, 1].mean()
        assert auc_like > 0  # the model learnt something on its own training data
    assert meta["features_col"] is None and len(meta["input_columns"]) == 39
    m = manifest(plan["xgb_a"])
    assert set(m["metrics"]["final_logloss"]) == {"train", "validation"}
    hashed_meta = json.loads((_model_dir(plan["xgb_h"]) / "model.json").read_text())
    assert hashed_meta["features_col"] == "features" and hashed_meta["num_features"] == 4096


@pytest.mark.parametrize("data", ["hashed", "as_is"])
def test_spark_mode_trains_and_saves_the_spark_model(spark, home, tmp_path: Path, data: str) -> None:
    import xgboost as xgb

    spec = _spec(tmp_path, f"xgb: {{kind: train_xgboost, inputs: {{train: {data}}}, params: {{workers: 2, {SMALL}}}}}")
    plan = load_and_run(spark, spec)
    meta, predictions = _predict(spark, plan["xgb"], plan[data])
    assert meta["mode"] == "spark" and meta["rounds"] == 12
    assert (_model_dir(plan["xgb"]) / "spark_model" / "metadata").exists()
    got = np.array([r["probability"][1] for r in predictions.collect()])
    assert len(got) == 1000
    if data == "as_is":  # SparkXGB names the booster's features after the columns: inference must too
        booster = xgb.Booster(model_file=str(_model_dir(plan["xgb"]) / meta["artifact"]))
        assert booster.feature_names == meta["input_columns"]
        frame = spark.read.parquet(plan[data].output_path("data")).toPandas()[meta["input_columns"]]
        expected = booster.predict(xgb.DMatrix(frame.astype("float32"), missing=np.nan))
        np.testing.assert_allclose(np.sort(got), np.sort(expected), rtol=1e-5)


def test_spark_mode_refuses_more_workers_than_task_slots(spark, home, tmp_path: Path) -> None:
    spec = _spec(tmp_path, f"xgb: {{kind: train_xgboost, inputs: {{train: as_is}}, params: {{workers: 3, {SMALL}}}}}")
    with pytest.raises(StageFailedError, match=r"workers: 3 needs 3 concurrent Spark task slots but the session has 2"):
        load_and_run(spark, spec)
