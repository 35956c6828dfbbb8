"""Fingerprints and paths: a change invalidates exactly the stage and everything downstream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError, StageConfigError, StorageError
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.plan.resolved import PlanParamsError
from dagspec.spec.loader import load_spec
from dagspec.spec.params import loaded_params
from dagspec.spec.templates import render
from dagspec.storage import join_under
from tests.helpers import write_spec

SPEC = """
params:
  seed: {type: integer, default: 42}
  fraction: {type: number, default: 0.2}
stages:
  raw: {kind: read, params: {format: parquet, path: data/in}}
  other: {kind: read, params: {format: csv, path: data/other, header: true}}
  balanced: {kind: undersample, inputs: {data: raw}, params: {seed: "{{ params.seed }}"}}
  split:
    kind: split
    inputs: {data: balanced}
    params: {fractions: {train: "{{ 1 - params.fraction }}", test: "{{ params.fraction }}"}}
  joined: {kind: sql, inputs: {a: split.train, b: other}, params: {query: "select * from a"}}
"""


@pytest.fixture
def spec(tmp_path: Path):
    return load_spec(write_spec(tmp_path, SPEC))


def fingerprints(spec, **params) -> dict[str, str]:
    plan = resolve_pipeline(spec, default_context(spec, params), home=Path("/project"), storage_root="/store")
    return {name: stage.fingerprint for name, stage in plan.items()}


def test_fingerprints_are_stable(spec) -> None:
    assert fingerprints(spec) == fingerprints(spec)


def test_a_param_change_invalidates_that_stage_and_downstream_only(spec) -> None:
    before, after = fingerprints(spec), fingerprints(spec, seed=7)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"balanced", "split", "joined"}


def test_a_change_in_an_independent_branch_leaves_the_other_alone(spec) -> None:
    before, after = fingerprints(spec), fingerprints(spec, fraction=0.3)
    assert {n for n in before if before[n] != after[n]} == {"split", "joined"}


def test_rendered_params_are_validated_and_paths_resolved(spec) -> None:
    plan = resolve_pipeline(
        spec, default_context(spec, {"fraction": 0.25}), home=Path("/project"), storage_root="/store"
    )
    split = plan["split"]
    assert split.params_json()["fractions"] == {"train": 0.75, "test": 0.25}
    assert split.checkpoint_dir == f"/store/pipe/split/{split.fingerprint}"
    assert plan["joined"].inputs["a"].path == f"/store/pipe/split/{split.fingerprint}/train"
    assert plan["joined"].inputs["b"].path.endswith("/other/" + plan["other"].fingerprint + "/data")


def test_params_travel_as_the_kinds_model_validated_once_per_process(spec) -> None:
    plan = resolve_pipeline(spec, default_context(spec), home=Path("/project"), storage_root="/store")
    raw, split = plan["raw"], plan["split"]
    assert raw.params is loaded_params(spec, "raw", type(raw.params))  # no template: the loader's model
    assert loaded_params(spec, "split", type(split.params)) is None  # templated: validated with the run's values
    received = ResolvedStage.from_json(split.to_json())  # the job's process validates them once, on reading
    assert received == split and type(received.params) is type(split.params)
    assert json.loads(split.to_json())["params"] == split.key["params"]  # by alias, as in the key


def test_a_plan_whose_params_the_kind_now_refuses_names_the_stage_and_kind(spec) -> None:
    plan = resolve_pipeline(spec, default_context(spec), home=Path("/project"), storage_root="/store")
    sent = json.loads(plan["raw"].to_json())
    with pytest.raises(
        PlanParamsError, match=r"^stage 'raw': params refused by kind 'read': format: Input should be 'parquet'"
    ):
        ResolvedStage.from_json(json.dumps({**sent, "params": {**sent["params"], "format": "xml"}}))
    with pytest.raises(PlanParamsError, match=r"^stage 'raw': .*'gone'"):
        ResolvedStage.from_json(json.dumps({**sent, "kind": "gone"}))


def test_a_rendered_value_that_fails_the_model_names_file_line_stage_and_field(spec) -> None:
    with pytest.raises(StageConfigError) as info:
        resolve_pipeline(spec, default_context(spec, {"seed": "many"}), home=Path("/p"), storage_root="/s")
    assert str(info.value) == (
        f"{spec.source}:7:69: stages.balanced.params.seed: Input should be a valid integer, unable to parse string "
        "as an integer (got 'many', rendered from '{{ params.seed }}')"
    )


def test_run_time_and_validate_time_failures_read_the_same(tmp_path: Path) -> None:
    text = """
    params:
      d: {type: integer, default: 1}
    stages:
      raw: {kind: read, params: {format: parquet, path: data/in}}
      few: {kind: sample, inputs: {data: raw}, params: {n: "{{ 10 // params.d }}"}}
    """
    spec = load_spec(write_spec(tmp_path, text))  # the default renders
    with pytest.raises(StageConfigError) as at_run:
        resolve_pipeline(spec, default_context(spec, {"d": 0}), home=Path("/p"), storage_root="/s")
    with pytest.raises(SpecValidationError) as at_validate:
        load_spec(write_spec(tmp_path, text.replace("default: 1", "default: 0")))
    expected = (
        f"{spec.source}:5:56: stages.few.params.n: cannot render '{{{{ 10 // params.d }}}}': "
        "integer division or modulo by zero (ZeroDivisionError)"
    )
    assert str(at_run.value) == expected and str(at_validate.value) == expected


MATRIX = """
params:
  sizes: {type: array, default: [2, 3]}
stages:
  raw: {kind: read, params: {format: parquet, path: data/in}}
  few: {kind: sample, matrix: {n: "{{ params.sizes }}"}, inputs: {data: raw}, params: {n: "{{ matrix.n }}"}}
  out: {kind: export, inputs: {data: few}, params: {path: "m/n{{ matrix.n }}"}}
"""


def test_matrix_expansions_render_their_values_and_read_their_upstream(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, MATRIX))
    plan = resolve_pipeline(spec, default_context(spec), home=Path("/p"), storage_root="/s")
    assert [plan[f"few__{n}"].params_json()["n"] for n in (2, 3)] == [2, 3]
    assert plan["out__3"].params_json()["path"] == "m/n3"
    assert plan["out__3"].inputs["data"].fingerprint == plan["few__3"].fingerprint
    assert plan["few__2"].stage_dir == "/s/pipe/few__2"


def test_a_run_cannot_change_a_param_that_shapes_a_matrix(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, MATRIX))
    resolve_pipeline(spec, default_context(spec, {"sizes": [2, 3]}), home=Path("/p"), storage_root="/s")
    with pytest.raises(StageConfigError, match=r"param 'sizes' shapes a matrix.*\(got \[4\]\): edit the default"):
        resolve_pipeline(spec, default_context(spec, {"sizes": [4]}), home=Path("/p"), storage_root="/s")


def test_templates_cannot_reach_python_internals() -> None:
    from jinja2.exceptions import SecurityError

    with pytest.raises(SecurityError):
        render("{{ params.__class__.__mro__[1].__subclasses__() }}", {"params": {}})


def test_paths_cannot_leave_the_storage_root() -> None:
    assert join_under("/store", "out/train") == "/store/out/train"
    for bad in ("../x", "a/../../x", "/etc/passwd", "hdfs://elsewhere/x"):
        with pytest.raises(StorageError):
            join_under("/store", bad)
