"""Batch inference with real Keras models on real Spark, through the real runtime.

The models, their data and the ``test_saved_model`` kind are in this folder's ``conftest.py``.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from scipy.spatial import cKDTree

from tests.helpers import load_and_run, manifest, write_spec

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("saved_model_kind")]


def run_predict(spark, tmp_path, model_dir, data, scores: str):
    """Run a spec of the saved model at ``model_dir``, the Parquet events at ``data`` and the
    ``scores`` stages (YAML) that read them as ``model`` and ``events``; returns the plan."""
    stages = (
        f'model: {{kind: test_saved_model, params: {{path: "{model_dir}"}}}}\n'
        f'events: {{kind: read, params: {{format: parquet, path: "{data}"}}}}\n' + textwrap.dedent(scores).strip()
    )
    return load_and_run(spark, write_spec(tmp_path / "pipelines", "stages:\n" + textwrap.indent(stages, "  ")))


def test_predict_keeps_key_and_passthrough_and_matches_the_model(
    spark, home, tmp_path, keras_models, events_parquet
) -> None:
    scores = """
          scores:
            kind: predict
            inputs: {model: model, data: events}
            params: {key_col: event_id, passthrough: [note], batch_size: 100}
          scores_array:
            kind: predict
            inputs: {model: model, data: events}
            params: {probabilities: array, batch_size: 5000}
        """
    plan = run_predict(spark, tmp_path, keras_models["dirs"]["dense"], events_parquet, scores)
    out = spark.read.parquet(plan["scores"].output_path("data"))
    assert out.columns == ["event_id", "note", "prob_0", "prob_1", "prob_2", "prediction"]
    assert dict(out.dtypes)["prediction"] == "int"
    rows = out.toPandas().sort_values("event_id")
    assert len(rows) == 3000 and rows["event_id"].tolist() == list(range(0, 30000, 10))
    assert rows["note"].tolist() == [f"e{i}" for i in range(3000)]
    probs = rows[["prob_0", "prob_1", "prob_2"]].to_numpy()
    expected = keras_models["reference"]["dense"]
    assert np.abs(probs - expected).max() < 1e-5
    # argmax in the JVM agrees with numpy's except where two probabilities are within float noise
    close = np.sort(expected, 1)[:, -1] - np.sort(expected, 1)[:, -2] < 1e-5
    assert (rows["prediction"].to_numpy() == expected.argmax(1))[~close].all()
    assert manifest(plan["scores"])["metrics"]["flavor"] == "keras"

    as_array = spark.read.parquet(plan["scores_array"].output_path("data"))
    assert as_array.columns == ["probability", "prediction"]
    assert as_array.count() == 3000
    sums = as_array.selectExpr("aggregate(probability, 0D, (a, p) -> a + p) AS s").toPandas()["s"]
    assert np.allclose(sums, 1.0, atol=1e-5)
    # no key to join on: each row's whole array must be one reference row, in classes order, and
    # every reference row must be found once (distinct reference rows are >= 2.8e-5 apart; measured
    # distance to the nearest one <= 1.2e-7)
    arrays = as_array.toPandas()
    probability = np.stack(arrays["probability"].to_numpy())
    distance, nearest = cKDTree(expected).query(probability, p=np.inf)
    assert distance.max() < 1e-5 and len(set(nearest.tolist())) == 3000
    assert (arrays["prediction"].to_numpy() == probability.argmax(1)).all()  # classes are 0, 1, 2


def test_predict_binary_sigmoid_model_gives_two_probabilities(
    spark, home, tmp_path, keras_models, events_parquet
) -> None:
    scores = """
          scores: {kind: predict, inputs: {model: model, data: events}, params: {key_col: event_id}}
        """
    plan = run_predict(spark, tmp_path, keras_models["dirs"]["binary"], events_parquet, scores)
    rows = spark.read.parquet(plan["scores"].output_path("data")).toPandas().sort_values("event_id")
    p1 = keras_models["reference"]["binary"]
    assert np.abs(rows["prob_1"].to_numpy() - p1).max() < 1e-5
    assert np.abs(rows["prob_0"].to_numpy() - (1 - p1)).max() < 1e-5
    # exact except where p1 is within float noise of 0.5 (measured: no such row, the closest is 1e-4 away)
    near_tie = np.abs(p1 - 0.5) < 1e-5
    assert (rows["prediction"].to_numpy() == (p1 > 0.5))[~near_tie].all()


def test_predict_rejects_a_missing_key_column(spark, home, tmp_path, keras_models, events_parquet) -> None:
    from dagspec.errors import StageFailedError

    scores = """
          scores: {kind: predict, inputs: {model: model, data: events}, params: {key_col: id}}
        """
    with pytest.raises(StageFailedError, match=r"columns \['id'\] are not in the data"):
        run_predict(spark, tmp_path, keras_models["dirs"]["dense"], events_parquet, scores)


def test_predict_two_named_inputs_with_sequences_padded_per_batch(
    spark, home, tmp_path, keras_models, sequences_parquet
) -> None:
    scores = """
          scores: {kind: predict, inputs: {model: model, data: events}, params: {key_col: event_id, batch_size: 300}}
        """
    plan = run_predict(spark, tmp_path, keras_models["dirs"]["sequence"], sequences_parquet, scores)
    rows = spark.read.parquet(plan["scores"].output_path("data")).toPandas().sort_values("event_id")
    # the reference padded everything to the longest event; masking makes the padding irrelevant
    expected = keras_models["reference"]["sequence"]
    assert np.abs(rows[["prob_0", "prob_1", "prob_2"]].to_numpy() - expected).max() < 1e-5


def test_small_inputs_are_scored_by_fewer_tasks(spark) -> None:
    from dagspec.kinds.scoring.models import coalesce_small

    df = spark.range(0, 1000, numPartitions=4)
    assert coalesce_small(df, 20_000).rdd.getNumPartitions() == 1
    assert coalesce_small(df, 400).rdd.getNumPartitions() == 3  # ceil(1000 / 400)
    assert coalesce_small(df, 100).rdd.getNumPartitions() == 4  # never more partitions than before
    assert sorted(r.id for r in coalesce_small(df, 400).collect()) == list(range(1000))
