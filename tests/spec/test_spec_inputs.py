"""Stage inputs that read another spec's output: the mapping form, and the names checked against the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError
from dagspec.spec.loader import load_spec, spec_files
from dagspec.spec.spec_input import SpecInput
from dagspec.spec.together import load_specs
from tests.helpers import write_spec

INGEST = (
    "dag_id: ctr_ingest\nstages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"
    "  features: {kind: split, inputs: {data: raw}, params: {fractions: {train: 0.8, test: 0.2}}}\n"
)


def _reader(data: str, more: str = "") -> str:
    return f"{more}stages:\n  head:\n    kind: sample\n    inputs: {{data: {data}}}\n    params: {{n: 10}}\n"


def _load(folder: Path) -> dict[str, str]:
    loaded = load_specs(spec_files(folder), lambda p: p.name)
    return {item.file: "ok" if item.spec else str(item.error) for item in loaded}


def test_a_mapping_input_names_another_specs_output_and_makes_no_edge(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, _reader("{spec: ctr_ingest, output: features.test}")))
    stage = spec.stages["head"]
    assert stage.spec_inputs() == {"data": SpecInput(spec="ctr_ingest", output="features.test")}
    assert stage.stage_refs() == {} and spec.stage_order() == ["head"]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ("{spec: ctr_ingest, output: features}", "4:47: stages.head.inputs.data.output: String should match pattern"),
        ("{spec: ctr_ingest, outptu: features.test}", "4:39: stages.head.inputs.data.outptu: unknown key 'outptu' "
         "(did you mean 'output'?)"),
        ("{output: features.test}", "4:20: stages.head.inputs.data.spec: required key is missing"),
        ("features.test.x", "4:13: stages.head.inputs: input 'data': expected 'stage' or 'stage.output' (another "
         "spec's output: {spec: dag_id, output: stage.output}), got 'features.test.x'"),
    ],
)  # fmt: skip
def test_a_malformed_input_says_where(tmp_path: Path, data: str, error: str) -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec(write_spec(tmp_path, _reader(data)), "p.yaml")
    assert f"p.yaml:{error}" in str(caught.value)


def test_names_are_checked_against_the_folder_with_did_you_mean(tmp_path: Path) -> None:
    write_spec(tmp_path, INGEST, "ingest.yaml")
    write_spec(tmp_path, _reader("{spec: ctr_ingest, output: features.tset}"), "a.yaml")
    write_spec(tmp_path, _reader("{spec: ctr_ingst, output: features.test}"), "b.yaml")
    write_spec(tmp_path, _reader("{spec: ctr_ingest, output: features.test}"), "ok.yaml")
    found = _load(tmp_path)
    assert found["ok.yaml"] == "ok" and found["ingest.yaml"] == "ok"
    assert found["a.yaml"] == (
        "a.yaml:4:20: stages.head.inputs.data: spec 'ctr_ingest' has no output 'ctr_ingest.features.tset' "
        "(did you mean 'ctr_ingest.features.test'?); its outputs: ctr_ingest.features.test, "
        "ctr_ingest.features.train, ctr_ingest.raw.data"
    )
    assert found["b.yaml"].startswith(
        "b.yaml:4:20: stages.head.inputs.data: unknown asset 'ctr_ingst.features.test' (did you mean "
        "'ctr_ingest.features.test'?): no spec read with this one has dag_id 'ctr_ingst'"
    )


def test_a_spec_cannot_read_itself_this_way_nor_another_storage_root(tmp_path: Path) -> None:
    write_spec(tmp_path, INGEST, "ingest.yaml")
    write_spec(tmp_path, _reader("{spec: own, output: head.data}", "dag_id: own\n"), "own.yaml")
    write_spec(
        tmp_path,
        _reader("{spec: ctr_ingest, output: features.test}", "storage: {root: .dagspec/storage/elsewhere}\n"),
        "r.yaml",
    )
    found = _load(tmp_path)
    assert found["own.yaml"] == (
        "own.yaml:5:20: stages.head.inputs.data: 'own' is this spec: read its own stage output as 'head.data'"
    )
    assert found["r.yaml"] == (
        "r.yaml:5:20: stages.head.inputs.data: spec 'ctr_ingest' keeps its checkpoints under storage.root "
        "'.dagspec/storage', this one under '.dagspec/storage/elsewhere'; a spec reads another's output under the same storage root"
    )


MODELS = (
    "dag_id: models\nstages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"
    "  xgb: {kind: train_xgboost, inputs: {train: raw}}\n"
)


def test_an_output_of_another_type_than_the_input_expects_is_refused_where_it_is_named(tmp_path: Path) -> None:
    write_spec(tmp_path, MODELS, "models.yaml")
    write_spec(tmp_path, _reader("{spec: models, output: xgb.model}"), "table.yaml")
    evaluate = "stages:\n  eval:\n    kind: evaluate\n    inputs:\n      model: {spec: models, output: %s}\n" + (
        "      data: {spec: models, output: raw.data}\n"
    )
    write_spec(tmp_path, evaluate % "raw.data", "files.yaml")
    write_spec(tmp_path, evaluate % "xgb.model", "ok.yaml")
    found = _load(tmp_path)
    assert found["ok.yaml"] == "ok" and found["models.yaml"] == "ok"
    assert found["table.yaml"] == (
        "table.yaml:4:20: stages.head.inputs.data: 'models.xgb.model' is files (output 'model' of stage 'xgb', "
        "kind 'train_xgboost', in spec 'models') but input 'data' of kind 'sample' expects table"
    )
    assert found["files.yaml"] == (
        "files.yaml:5:14: stages.eval.inputs.model: 'models.raw.data' is table (output 'data' of stage 'raw', "
        "kind 'read', in spec 'models') but input 'model' of kind 'evaluate' expects files"
    )
