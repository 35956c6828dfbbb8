"""`dagspec validate` renders every templated param (defaults + a stand-in run context) and
checks it against the kind's model; optional params are nullable; Airflow's limits on names."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import YamlSourceError
from dagspec.spec.loader import load_spec
from dagspec.spec.yaml_source import load_yaml_text
from tests.helpers import spec_issues, write_spec


def issues(tmp_path: Path, text: str) -> list[str]:
    return spec_issues(tmp_path, text)


def stage(params: str) -> str:
    return f"""
    params:
      seed: {{type: integer, default: 1}}
      input: {{type: [string, "null"], default: null}}
    stages:
      raw: {{kind: read, params: {{format: parquet, path: data/in}}}}
      few: {{kind: sample, inputs: {{data: raw}}, params: {params}}}
    """


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            '{n: "{{ params.sede }}"}',
            "pipelines/pipe.yaml:6:56: stages.few.params.n: cannot render '{{ params.sede }}': 'sede' is undefined "
            "(known: force, input, seed); did you mean 'seed'?",
        ),
        (
            '{n: "{{ 1 // 0 }}"}',
            "pipelines/pipe.yaml:6:56: stages.few.params.n: cannot render '{{ 1 // 0 }}': "
            "integer division or modulo by zero (ZeroDivisionError)",
        ),
        (
            '{n: "{{ range(10**9) | list | length }}"}',
            "stages.few.params.n: cannot render '{{ range(10**9) | list | length }}': ranges in one template may "
            "hold at most 100000 items in all",
        ),
        ("{n: \"{{ 'x' * 10**9 }}\"}", "a repeated string or list would be 1000000000 long"),
        (
            '{n: "{{ params.seed | nofilter }}"}',
            "cannot render '{{ params.seed | nofilter }}': No filter named 'nofilter'",
        ),
        ('{n: "{{ nothing }}"}', "'nothing' is undefined (known: data_interval_end, data_interval_start, ds,"),
        (
            '{n: "{{ params.seed - 5 }}"}',
            "stages.few.params.n: Input should be greater than or equal to 1 (got -4, rendered from "
            "'{{ params.seed - 5 }}')",
        ),
        ('{n: 1, seed: "{{ ds }}"}', "valid integer, unable to parse string as an integer (got '2026-01-01', rendered"),
        ('{n: "{{ matrix.n }}"}', "cannot render '{{ matrix.n }}': 'matrix' is undefined"),
        ('{n: "{{ params.input.upper() }}"}', "cannot render '{{ params.input.upper() }}'"),
    ],
)
def test_templates_are_rendered_and_checked_at_validate(tmp_path: Path, params: str, expected: str) -> None:
    found = issues(tmp_path, stage(params))
    assert len(found) == 1 and expected in found[0], found


def test_templates_that_render_to_valid_values_pass(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, stage('{n: "{{ params.seed + 1 }}", seed: "{{ params.seed }}"}')))
    assert spec.stages["few"].params == {"n": "{{ params.seed + 1 }}", "seed": "{{ params.seed }}"}


@pytest.mark.parametrize(
    ("param", "expected"),
    [
        ('{type: string, default: ""}', "params.p: the default is an empty string, which Airflow's trigger form"),
        ("{type: integer}", "params.p: the default is no value, which Airflow's trigger form treats as a missing"),
        ("{type: [string, integer], default: null}", 'make the param optional: type: [string, "null"]'),
    ],
)
def test_a_default_the_trigger_form_treats_as_missing_is_refused(tmp_path: Path, param: str, expected: str) -> None:
    found = issues(
        tmp_path, f"params:\n  p: {param}\nstages:\n  raw: {{kind: read, params: {{format: parquet, path: x}}}}\n"
    )
    assert any(expected in line for line in found), found


def test_a_nullable_param_may_default_to_null(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, stage('{n: "{{ 3 if params.input is none else 4 }}"}')))
    assert spec.params["input"].optional and spec.params["input"].default is None
    assert not spec.params["seed"].optional


def test_recursive_aliases_are_a_located_error() -> None:
    with pytest.raises(YamlSourceError) as info:
        load_yaml_text("stages: {}\na: &a [*a]\nb: &b {x: *b}\n", "pipelines/rec.yaml")
    assert [str(i) for i in info.value.issues] == [
        "pipelines/rec.yaml:2:4: a[0]: recursive alias: this value contains itself (the anchor at line 2, column 4)",
        "pipelines/rec.yaml:3:4: b.x: recursive alias: this value contains itself (the anchor at line 3, column 4)",
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("dag_id: " + "d" * 251, "dag_id: dag_id is 251 characters long; Airflow allows at most 250"),
        ("dag_id: 'a b'", "dag_id 'a b' may only hold ASCII letters, digits, '_', '.' and '-'"),
        ("dag_id: dagspec_invalid_specs", "dag_id 'dagspec_invalid_specs' is reserved (the DAG file's error carrier)"),
        ("tags: ['" + "t" * 101 + "']", "is 101 characters long; Airflow takes 1 to 100"),
    ],
)
def test_dag_id_and_tags_fit_airflows_limits(tmp_path: Path, line: str, expected: str) -> None:
    found = issues(tmp_path, f"{line}\nstages:\n  raw: {{kind: read, params: {{format: parquet, path: x}}}}\n")
    assert any(expected in f for f in found), found


def test_a_dag_id_naming_a_python_global_is_fine(tmp_path: Path) -> None:
    assert (
        load_spec(
            write_spec(tmp_path, "dag_id: compiled\nstages:\n  r: {kind: read, params: {format: parquet, path: x}}\n")
        ).dag_id
        == "compiled"
    )
