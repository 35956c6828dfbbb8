"""The JSON Schema: generated from the models, committed up to date, accepts the shipped specs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from dagspec.kinds.catalog import load_catalog
from dagspec.spec.schema import schema_text
from tests.conftest import REPO

COMMITTED = REPO / "docs" / "dagspec.schema.json"
SHIPPED = sorted((REPO / "pipelines").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(COMMITTED.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def as_json(text: str) -> Any:
    # editors read `2026-01-01` as a string, as JSON would
    return json.loads(json.dumps(yaml.safe_load(text), default=str))


def errors(validator: Draft202012Validator, text: str) -> list[str]:
    return [e.message for e in validator.iter_errors(as_json(text))]


def test_the_committed_schema_is_what_dagspec_schema_prints() -> None:
    printed = subprocess.run(
        [str(Path(sys.executable).parent / "dagspec"), "schema"], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert printed == schema_text(load_catalog(REPO))
    assert printed == COMMITTED.read_text(), "regenerate: dagspec schema > docs/dagspec.schema.json"


def test_every_kind_has_its_params_selected_by_kind(validator: Draft202012Validator) -> None:
    schema = validator.schema
    stage = schema["$defs"]["StageSpec"]
    kinds = {b["if"]["properties"]["kind"]["const"] for b in stage["allOf"]}
    assert kinds == set(stage["properties"]["kind"]["enum"]) >= set(load_catalog(REPO).names())
    sample = schema["$defs"]["kind.sample"]
    assert sample["properties"]["seed"]["default"] == 42
    assert "nested" in sample["properties"] and sample["properties"]["nested"]["description"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_spec_validates_and_points_at_the_schema(validator: Draft202012Validator, path: Path) -> None:
    text = path.read_text()
    assert text.splitlines()[0] == "# yaml-language-server: $schema=../docs/dagspec.schema.json"
    assert errors(validator, text) == []


GOOD = """
stages:
  raw: {kind: read, params: {format: parquet, path: data/in}}
  few: {kind: sample, inputs: {data: raw}, params: {n: "{{ params.n }}", seed: 3}}
"""


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("stages:", "stagse: {}\nstages:"), "Additional properties are not allowed ('stagse' was unexpected)"),
        (("seed: 3", "sed: 3"), "Additional properties are not allowed ('sed' was unexpected)"),
        (("seed: 3", "seed: many"), "'many' is not valid under any of the given schemas"),
        (("kind: sample", "kind: sampel"), "'sampel' is not one of"),
        (("{data: raw}", "[raw]"), "['raw'] is not of type 'object'"),
    ],
)
def test_bad_specs_do_not_validate(validator: Draft202012Validator, change: tuple[str, str], expected: str) -> None:
    assert errors(validator, GOOD) == []
    found = errors(validator, GOOD.replace(*change))
    assert any(expected in message for message in found), found
