"""The model card: what the trainers write into model.json and what every model reader validates."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dagspec.errors import StageFailedError
from dagspec.kinds.class_names import label_class_names
from dagspec.kinds.model_card import (
    Features,
    ModelCard,
    TrainingData,
    parse_model_card,
    read_model_card,
)


def card(**changes: object) -> ModelCard:
    fields: dict[str, object] = {
        "flavor": "xgboost",
        "kind": "train_xgboost",
        "artifact": "booster.json",
        "task": "binary",
        "classes": [0, 1],
        "label_col": "label",
        "features_col": "features",
        "input_columns": ["features"],
        "input_shapes": {"features": [1024]},
        "num_features": 1024,
        "missing": float("nan"),
        "params": {"max_depth": 6, "num_round": 20},
        "trained_on": {"train": TrainingData(stage="hashed", output="data", fingerprint="abc", content="d1")},
        "train_time_s": 3.2,
        "metrics": {"final_logloss": {"train": 0.41}},
        "rounds": 20,  # a trainer's own run detail: kept as it is
    }
    return ModelCard.model_validate({**fields, **changes})


def test_a_card_reads_back_as_written_with_the_keys_the_flavors_read(tmp_path: Path) -> None:
    written = card()
    written.write(tmp_path)
    read = read_model_card(tmp_path)
    assert read.model_dump(exclude={"missing"}) == written.model_dump(exclude={"missing"})
    assert read.missing is not None and math.isnan(read.missing)  # NaN survives the JSON
    raw = json.loads((tmp_path / "model.json").read_text().replace("NaN", "null"))
    for key in ("flavor", "artifact", "classes", "task", "input_columns", "num_features", "features_col", "rounds"):
        assert raw[key] == getattr(read, key)
    assert raw["trained_on"]["train"] == {"stage": "hashed", "output": "data", "fingerprint": "abc", "content": "d1"}
    assert raw["card_version"] == 1 and read.rounds == 20 and read.model_extra == {}
    # what inference reads of a row is the layout the trainer wrote
    assert read.features().model_dump(exclude={"missing"}) == {
        "features_col": "features",
        "input_columns": ["features"],
        "num_features": 1024,
    }
    kept = card(resumed_epoch=3, history={"loss": [0.5, 0.4]})  # a trainer's run details: kept as they are
    assert parse_model_card(kept.model_dump_json(), "m/model.json").model_extra == {
        "resumed_epoch": 3,
        "history": {"loss": [0.5, 0.4]},
    }


def test_a_card_written_by_the_old_writer_reads_back(tmp_path: Path) -> None:
    # model.json as committed checkpoints hold it (json.dumps of the card's dict: NaN, every key)
    old_writer = json.dumps(card().model_dump(), indent=2)
    assert "NaN" in old_writer
    (tmp_path / "model.json").write_text(old_writer)
    read = read_model_card(tmp_path)
    assert read.features().num_features == 1024 and math.isnan(read.features().missing)


def test_a_card_without_an_xgboost_layout_has_no_features() -> None:
    keras = card(flavor="keras", kind="train_keras", num_features=None, missing=None)
    with pytest.raises(StageFailedError, match="has no num_features/missing: not an xgboost model"):
        keras.features()
    assert Features(input_columns=["a", "b"], num_features=2, missing=float("nan")).features_col is None


def test_class_names_name_the_classes_or_the_value_stands_in() -> None:
    named = card(task="multiclass", classes=[0, 1, 2], class_names=["QCD", "tt", "W+jets"])
    assert [named.class_name(c) for c in (0, 1, 2)] == ["QCD", "tt", "W+jets"]
    assert card().class_name(1) == "1"
    with pytest.raises(ValueError, match=r"class_names \['QCD'\] do not name the 2 classes"):
        card(class_names=["QCD"])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"flavor": "onnx"}, r"flavor: Input should be 'keras', 'xgboost', 'spark_ml' or 'vw'"),
        ({"classes": [0, 1, 2]}, r"task 'binary' does not fit 3 classes"),
        ({"classes": [True, False]}, r"classes\.0: Input should be a valid integer"),
        ({"classes": [1, 1]}, r"classes must be >= 2 distinct integers"),
        ({"artifact": ""}, r"artifact: String should have at least 1 character"),
    ],
)
def test_an_invalid_card_fails_naming_the_file_and_the_key(tmp_path: Path, changes: dict, message: str) -> None:
    data = {**card().model_dump(), **changes}
    (tmp_path / "model.json").write_text(json.dumps(data))
    with pytest.raises(StageFailedError, match=rf"model\.json is not a valid model card: .*{message}"):
        read_model_card(tmp_path)


def test_a_card_from_before_cards_says_to_train_again(tmp_path: Path) -> None:
    old = {"flavor": "keras", "artifact": "model.keras", "classes": [0, 1], "task": "binary"}
    (tmp_path / "model.json").write_text(json.dumps(old))
    with pytest.raises(
        StageFailedError,
        match=rf"^{tmp_path}/model\.json was written before model cards were versioned \(no card_version\); this "
        r"dagspec reads card_version 1: run its training stage again \(dagspec run SPEC --force, or remove",
    ):
        read_model_card(tmp_path)
    with pytest.raises(StageFailedError, match=r"is not a model directory: no model\.json"):
        read_model_card(tmp_path / "nothing")
    (tmp_path / "model.json").write_text("[1, 2]")
    with pytest.raises(StageFailedError, match="must hold a JSON object"):
        read_model_card(tmp_path)


def test_class_names_come_from_a_label_columns_metadata() -> None:
    assert label_class_names({"class_names": ["QCD", "tt", "W+jets"]}) == ["QCD", "tt", "W+jets"]
    assert label_class_names({}) is None
    assert label_class_names({"class_names": "QCD"}) is None


def test_a_newer_card_is_refused_naming_the_file_and_both_versions(tmp_path: Path) -> None:
    newer = {**card().model_dump(), "card_version": 2, "something_new": True}
    (tmp_path / "model.json").write_text(json.dumps(newer))
    with pytest.raises(
        StageFailedError,
        match=r"^train\.model/model\.json has card_version 2, newer than this dagspec reads \(card_version 1\): "
        r"upgrade dagspec, or run its training stage again \(dagspec run SPEC --force, or remove the checkpoint\) "
        r"with this one$",
    ):
        read_model_card(tmp_path, shown_as="train.model")
    for version, shown in (("0", "0"), ('"1"', "'1'"), ("true", "True")):
        with pytest.raises(StageFailedError, match=rf"card_version must be a positive integer, got {shown};"):
            parse_model_card(f'{{"card_version": {version}}}', "m/model.json")
