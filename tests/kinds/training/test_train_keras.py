"""train_keras on real Spark, real TensorFlow and real Parquet files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagspec.errors import StageFailedError
from dagspec.kinds.model_card import read_model_card
from dagspec.kinds.training.keras_inputs import InputSpec, encode_features, encode_labels
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark


def _noise(*cols: str) -> str:
    # deterministic pseudo-random in [-1, 1) without a Python UDF
    return f"cast((pmod(hash({', '.join(cols)}), 2000) - 1000) / 1000.0 as double)"


def physics_events(spark: SparkSession, n: int, hlf_width: int = 14) -> DataFrame:
    """The columns topology_features writes, class-dependent so a model has something to learn.

    ``hlf_width`` < 14 for the last row only makes one corrupt row at the end of the table.
    """
    df = spark.range(n).withColumn("label", (F.col("id") % 3).cast("int"))
    shift = "label * 0.6"
    hlf = F.expr(f"transform(sequence(0, 13), k -> {_noise('id', 'k')} + {shift})")
    if hlf_width < 14:
        hlf = F.when(F.col("id") == n - 1, F.slice(hlf, 1, hlf_width)).otherwise(hlf)
    return (
        df.withColumn("HLF_input", hlf)
        .withColumn("encoded_label", F.expr("transform(sequence(0, 2), k -> if(k = label, 1.0, 0.0))"))
        .withColumn(
            "GRU_input",
            F.expr(
                f"transform(sequence(0, cast(id % 4 as int)), "
                f"p -> transform(sequence(0, 18), f -> {_noise('id', 'p', 'f')} + {shift}))"
            ),
        )
    )


def write_events(df: DataFrame, path: Path, files: int) -> None:
    # one sorted file set: the global row order is the id order, so shards are predictable
    df.repartitionByRange(files, "id").sortWithinPartitions("id").write.parquet(str(path))


def events_spec(tmp_path: Path, tables: dict[str, tuple[DataFrame, int]], stages: str) -> Path:
    """``<tmp_path>/pipelines/pipe.yaml``: each table written (``write_events``, in that many files)
    to ``<tmp_path>/<name>`` and read by a stage ``<name>``, then ``stages`` (YAML as under ``stages:``)."""
    reads = ""
    for name, (df, files) in tables.items():
        write_events(df, tmp_path / name, files)
        reads += f'  {name}: {{kind: read, params: {{format: parquet, path: "{tmp_path / name}"}}}}\n'
    return write_spec(
        tmp_path / "pipelines", "stages:\n" + reads + textwrap.indent(textwrap.dedent(stages).strip("\n"), "  ") + "\n"
    )


def model_dir(plan: dict[str, Any], stage: str) -> Path:
    return Path(plan[stage].output_path("model"))


def predict_accuracy(model_path: Path, data: Path) -> float:
    """Accuracy of a saved model on Parquet data, through the same encoders and model.json specs."""
    meta = json.loads((model_path / "model.json").read_text())
    model = keras.models.load_model(model_path / meta["artifact"])
    specs = [InputSpec.from_json(s) for s in meta["inputs"]]
    table = pq.read_table(data)
    probs = model.predict(encode_features(table, specs), verbose=0)
    labels = encode_labels(table, meta["label_col"], meta["task"], len(meta["classes"]))
    if meta["task"] == "binary":
        return float(np.mean((probs[:, 0] > 0.5) == (labels[:, 0] > 0.5)))
    return float(np.mean(probs.argmax(axis=1) == labels.argmax(axis=1)))


def test_hlf_dense_learns_and_writes_model_files(spark, home, tmp_path: Path) -> None:
    named = {"class_names": ["QCD", "tt", "W+jets"]}  # as topology_features names its label columns
    train = physics_events(spark, 1200).withMetadata("encoded_label", named)
    spec = events_spec(
        tmp_path,
        {"train": (train, 2), "val": (physics_events(spark, 300), 1)},
        """
        model:
          kind: train_keras
          inputs: {train: train, validation: val}
          params: {architecture: hlf_dense, epochs: 3, batch_size: 32, learning_rate: 0.01}
        """,
    )
    plan = load_and_run(spark, spec)
    out = model_dir(plan, "model")
    meta = json.loads((out / "model.json").read_text())
    assert meta["flavor"] == "keras" and (out / meta["artifact"]).is_file()
    assert (meta["features_col"], meta["label_col"], meta["task"]) == ("HLF_input", "encoded_label", "multiclass")
    assert meta["input_shapes"] == {"HLF_input": [14]} and meta["classes"] == [0, 1, 2]
    history = meta["history"]
    assert {len(history[k]) for k in ("loss", "accuracy", "val_loss", "val_accuracy")} == {3}
    assert history["loss"][-1] < history["loss"][0]
    assert meta["params"]["epochs"] == 3 and meta["peak_memory_mb"] > 0
    card = read_model_card(out)  # the card every reader validates
    assert card.kind == "train_keras" and card.metrics["final_val_loss"] == history["val_loss"][-1]
    assert card.class_names == ["QCD", "tt", "W+jets"]  # from the label column's metadata
    assert {role: (d.stage, d.fingerprint) for role, d in card.trained_on.items()} == {
        "train": ("train", plan["train"].fingerprint),
        "validation": ("val", plan["val"].fingerprint),
    }
    metrics = manifest(plan["model"])["metrics"]
    assert metrics["history"] == history and metrics["resumed_epoch"] == 0
    assert metrics["steps_per_epoch"] == 38 and metrics["train_rows"] == 1200  # ceil(1200 / 32)
    assert predict_accuracy(out, tmp_path / "val") > 0.8  # chance is 1/3
    # the per-epoch checkpoints lived in the scratch area, which the commit removes
    assert not list(Path(plan["model"].stage_dir).glob("_scratch-*"))


def test_sequence_models_pad_variable_particle_counts(spark, home, tmp_path: Path) -> None:
    spec = events_spec(
        tmp_path,
        {"train": (physics_events(spark, 240), 1)},
        """
        gru: {kind: train_keras, inputs: {train: train},
              params: {architecture: particle_gru, epochs: 3, batch_size: 40, learning_rate: 0.01}}
        inclusive: {kind: train_keras, inputs: {train: train},
                    params: {architecture: inclusive, epochs: 3, batch_size: 40, learning_rate: 0.01,
                             max_particles: 3}}
        """,
    )
    plan = load_and_run(spark, spec)
    gru = json.loads((model_dir(plan, "gru") / "model.json").read_text())
    assert gru["input_shapes"] == {"GRU_input": [None, 19]}
    inclusive = json.loads((model_dir(plan, "inclusive") / "model.json").read_text())
    assert inclusive["input_columns"] == ["GRU_input", "HLF_input"]
    assert inclusive["input_shapes"] == {"GRU_input": [3, 19], "HLF_input": [14]}
    for stage in ("gru", "inclusive"):
        loss = json.loads((model_dir(plan, stage) / "model.json").read_text())["history"]["loss"]
        assert loss[0] > loss[1] > loss[2]
        # the padded/truncated sequences carry the signal: measured 0.92-0.99 over seeds 1, 2, 3, 42
        # (chance: 1/3, the classes are balanced)
        assert predict_accuracy(model_dir(plan, stage), tmp_path / "train") > 0.75


def test_wide_deep_trains_on_a_hashed_sparse_vector(spark, home, tmp_path: Path) -> None:
    from pyspark.ml.feature import FeatureHasher

    raw = spark.range(2000).select(
        F.col("id"),
        (F.col("id") % 7).cast("string").alias("site"),
        (F.col("id") % 11).cast("string").alias("device"),
        F.when(F.col("id") % 7 < 3, 1).otherwise(0).alias("label"),
    )
    hashed = FeatureHasher(numFeatures=256, inputCols=["site", "device"], outputCol="features").transform(raw)
    hashed.select("id", "features", "label").repartition(2).write.parquet(str(tmp_path / "ctr"))
    spec = write_spec(
        tmp_path / "pipelines",
        f"""
        stages:
          train: {{kind: read, params: {{format: parquet, path: "{tmp_path / "ctr"}"}}}}
          ctr: {{kind: train_keras, inputs: {{train: train}},
                 params: {{architecture: wide_deep, epochs: 4, batch_size: 64, learning_rate: 0.02}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    meta = json.loads((model_dir(plan, "ctr") / "model.json").read_text())
    assert (meta["task"], meta["classes"], meta["input_shapes"]) == ("binary", [0, 1], {"features": [256]})
    assert meta["inputs"][0]["model_inputs"] == ["features_indices", "features_values"]
    assert meta["history"]["loss"][-1] < meta["history"]["loss"][0]
    assert predict_accuracy(model_dir(plan, "ctr"), tmp_path / "ctr") > 0.9  # the label is a function of site


def test_two_workers_train_over_uneven_shards_with_validation(spark, home, tmp_path: Path) -> None:
    # 3 files, sizes uneven by design: one worker's shard wraps around, both run the same steps
    spec = events_spec(
        tmp_path,
        {"train": (physics_events(spark, 1001), 3), "val": (physics_events(spark, 301), 2)},
        """
        model:
          kind: train_keras
          inputs: {train: train, validation: val}
          params: {architecture: hlf_dense, epochs: 3, batch_size: 25, learning_rate: 0.01, workers: 2,
                   steps_per_execution: 8}
        """,
    )
    plan = load_and_run(spark, spec)
    metrics = manifest(plan["model"])["metrics"]
    assert metrics["workers"] == 2 and metrics["global_batch_size"] == 50
    assert metrics["steps_per_epoch"] == 21  # ceil(501 / 25): the 501-row shard sets the pace
    assert {len(v) for v in metrics["history"].values()} == {3}
    assert metrics["history"]["loss"][-1] < metrics["history"]["loss"][0]
    assert predict_accuracy(model_dir(plan, "model"), tmp_path / "val") > 0.8


def test_more_workers_than_task_slots_fails_before_scheduling(spark, home, tmp_path: Path) -> None:
    spec = events_spec(
        tmp_path,
        {"train": (physics_events(spark, 30), 1)},
        "model: {kind: train_keras, inputs: {train: train}, params: {architecture: hlf_dense, workers: 3}}",
    )
    with pytest.raises(StageFailedError, match=r"workers: 3 needs 3 concurrent task slots, .* has 2"):
        load_and_run(spark, spec)


def test_a_failing_worker_fails_the_stage_with_its_traceback(spark, home, tmp_path: Path) -> None:
    # the corrupt row is the last one: only worker 1 reads it, while worker 0 waits in an all-reduce
    spec = events_spec(
        tmp_path,
        {"train": (physics_events(spark, 400, hlf_width=13), 1)},
        """
        model: {kind: train_keras, inputs: {train: train},
                params: {architecture: hlf_dense, epochs: 2, batch_size: 20, workers: 2, shuffle: false}}
        """,
    )
    with pytest.raises(StageFailedError) as failure:
        load_and_run(spark, spec)
    message = str(failure.value)
    assert "worker 1 exited with 1" in message
    assert "Traceback" in message and "InputDataError" in message
    assert "column 'HLF_input': a row has 13 values, expected 14" in message
