"""Fixtures of the scoring tests: tiny but real Keras models, their data, and a test-only kind.

The models are trained here on synthetic data and saved as ``.keras`` with the ``model.json`` a
training kind writes. The kind ``test_saved_model`` hands their directory to a pipeline as a files
output, the way a training stage would.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dagspec.kinds.base import FILES, Inputs, Outputs, StageContext, StageParams, kind, kind_of
from dagspec.kinds.model_card import ModelCard
from tests.conftest import REPO


class SavedModelParams(StageParams):
    """A model directory made by a test."""

    path: str


@kind("test_saved_model", params=SavedModelParams, inputs={}, outputs={"model": FILES})
def saved_model(inputs: Inputs, params: SavedModelParams, ctx: StageContext) -> Outputs:
    """tests only: a prepared model directory as a files output"""
    shutil.copytree(params.path, ctx.local_output_dir("model"), dirs_exist_ok=True)
    return {}


@pytest.fixture(scope="package")
def saved_model_kind() -> Iterator[None]:
    """``test_saved_model`` in the catalog of the project the tests run in (``home``: the repo), then out
    again when this package's tests are done (later tests, e.g. the schema's, see only real kinds)."""
    from dagspec.kinds.catalog import load_catalog

    definition = kind_of(saved_model)
    assert definition is not None
    catalog = load_catalog(REPO)
    catalog.add(definition, "tests")
    yield
    for table in (catalog.kinds, catalog.origins, catalog.files):
        table.pop(definition.name, None)


def _save(model: Any, folder: Path, meta: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save(folder / "model.keras")
    card = {"label_col": "label", "input_columns": [], "trained_on": {}, **meta}
    ModelCard(flavor="keras", kind="train_keras", artifact="model.keras", **card).write(folder)
    return folder


@pytest.fixture(scope="session")
def keras_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Four small trained models, their data and their in-process predictions (the reference)."""
    import keras

    keras.utils.set_random_seed(11)
    root = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(11)
    n = 3000
    x = rng.normal(size=(n, 4))
    label = np.where(x[:, 0] + 0.5 * rng.normal(size=n) > 0.6, 2, np.where(x[:, 1] * x[:, 2] > 0, 1, 0))
    dense = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3, activation="softmax")]
    )
    dense.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    dense.fit(x, label, epochs=4, batch_size=64, verbose=0)
    weak = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])  # linear: weaker
    weak.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    weak.fit(x, label, epochs=1, batch_size=64, verbose=0)
    clicked = (label == 2).astype(int)
    binary = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    binary.compile(optimizer="adam", loss="binary_crossentropy")
    binary.fit(x, clicked, epochs=3, batch_size=64, verbose=0)

    # two named inputs as train_keras builds them: a masked GRU over variable-length particle lists
    # (padded per batch by the flavor) and a Spark ML vector
    lengths = rng.integers(1, 6, size=n)
    seq = [rng.normal(size=(k, 3)) + (label[i] == 1) for i, k in enumerate(lengths)]
    padded = np.zeros((n, lengths.max(), 3))
    for i, s in enumerate(seq):
        padded[i, : len(s)] = s
    seq_in, hlf_in = keras.Input((None, 3), name="seq"), keras.Input((2,), name="hlf")
    hidden = keras.layers.GRU(4)(keras.layers.Masking(0.0)(seq_in))
    joined = keras.layers.Concatenate()([hidden, hlf_in])
    sequence = keras.Model([seq_in, hlf_in], keras.layers.Dense(3, activation="softmax")(joined))
    sequence.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    sequence.fit([padded, x[:, :2]], label, epochs=1, batch_size=64, verbose=0)

    multiclass = {
        "input_columns": ["x"],
        "input_shapes": {"x": [4]},
        "classes": [0, 1, 2],
        "task": "multiclass",
        "label_col": "label",
        "class_names": ["QCD", "tt", "W+jets"],
        "train_time_s": 1.5,
        "peak_memory_mb": 300.0,
        "cpu_load": 1.2,
    }
    return {
        "x": x,
        "label": label,
        "clicked": clicked,
        "dirs": {
            "dense": _save(dense, root / "dense", multiclass),
            "weak": _save(weak, root / "weak", {**multiclass, "train_time_s": 0.5}),
            "binary": _save(
                binary,
                root / "binary",
                {
                    "features_col": "x",
                    "input_shapes": {"x": [4]},
                    "classes": [0, 1],
                    "task": "binary",
                    "label_col": "clicked",
                },
            ),
            "sequence": _save(
                sequence,
                root / "sequence",
                {
                    "input_columns": ["seq", "hlf"],
                    "classes": [0, 1, 2],
                    "input_shapes": {"seq": [None, 3], "hlf": [2]},
                    "task": "multiclass",
                },
            ),
        },
        "seq": seq,
        "reference": {
            "dense": dense.predict(x, verbose=0).astype(np.float64),
            "weak": weak.predict(x, verbose=0).astype(np.float64),
            "binary": binary.predict(x, verbose=0).astype(np.float64).reshape(-1),
            "sequence": sequence.predict([padded, x[:, :2]], verbose=0).astype(np.float64),
        },
    }


@pytest.fixture(scope="session")
def events_parquet(spark, keras_models: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The models' data as Parquet in 3 files: event_id, x (array<double>), label, clicked, a note."""
    import pandas as pd

    x = keras_models["x"]
    frame = pd.DataFrame(
        {
            "event_id": np.arange(len(x), dtype=np.int64) * 10,
            "x": list(x),
            "label": keras_models["label"].astype(np.int32),
            "clicked": keras_models["clicked"].astype(np.int32),
            "note": [f"e{i}" for i in range(len(x))],
        }
    )
    path = tmp_path_factory.mktemp("data") / "events"
    spark.createDataFrame(frame).repartition(3).write.parquet(str(path))
    return path


@pytest.fixture(scope="session")
def sequences_parquet(spark, keras_models: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sequence model's data: event_id, seq (array<array<double>>), hlf (array<double>).

    hlf is not a Spark ML vector: on Spark 4.2 any vector column read from Parquet under an Arrow
    UDF fails with UNSUPPORTED_DATATYPE (even through vector_to_array) - a known open issue.
    """
    rows = [(i, s.tolist(), keras_models["x"][i, :2].tolist()) for i, s in enumerate(keras_models["seq"])]
    path = tmp_path_factory.mktemp("data") / "sequences"
    spark.createDataFrame(rows, ["event_id", "seq", "hlf"]).repartition(2).write.parquet(str(path))
    return path
