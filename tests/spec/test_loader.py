"""Spec loading: every defect gives file:line:col, the field and what is expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError, YamlSourceError
from dagspec.spec.loader import load_spec
from dagspec.spec.yaml_source import load_yaml_text
from tests.helpers import write_spec

FIXTURES = Path(__file__).parent / "fixtures" / "specs"


def issues_of(name: str, error: type[Exception] = SpecValidationError) -> list[str]:
    with pytest.raises(error) as info:
        load_spec(FIXTURES / name, f"pipelines/{name}")
    return [str(i) for i in info.value.issues]  # type: ignore[attr-defined]


def test_valid_spec_gets_defaults_and_its_file_stem_as_dag_id() -> None:
    spec = load_spec(FIXTURES / "valid_minimal.yaml")
    assert spec.dag_id == "valid_minimal"
    assert spec.spark.conn_id == "spark_default"
    assert spec.storage.root == ".dagspec/storage"
    assert spec.stage_order() == ["raw"]


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        (
            "bad_type.yaml",
            "pipelines/bad_type.yaml:10:13: stages.balanced.params.seed: Input should be a valid integer",
        ),
        (
            "duplicate_key.yaml",
            "pipelines/duplicate_key.yaml:5:3: stages.raw: duplicate key 'raw' (first defined on line 2)",
        ),
        (
            "unknown_kind.yaml",
            "pipelines/unknown_kind.yaml:3:11: stages.raw.kind: unknown stage kind 'reed' (did you mean 'read'?)",
        ),
        (
            "unknown_input.yaml",
            "pipelines/unknown_input.yaml:7:20: stages.balanced.inputs.data: unknown stage 'rwa' (did you mean 'raw'?)",
        ),
        ("cycle.yaml", "pipelines/cycle.yaml:4:13: stages.a.inputs: cycle between stages: a -> b -> c -> a"),
        ("output_of_single.yaml", "stage 'raw' has a single output; refer to it as 'raw', not 'raw.train'"),
        ("path_escape.yaml", "pipelines/path_escape.yaml:8:20: stages.out.params.path: must stay inside storage.root"),
        ("bad_schedule.yaml", "pipelines/bad_schedule.yaml:1:11: schedule: expected a cron expression"),
        ("bad_param_default.yaml", "params.fraction: default 2.0 does not match the param's schema"),
    ],
)
def test_each_defect_is_located_and_explained(fixture: str, expected: str) -> None:
    found = issues_of(fixture, SpecValidationError if fixture != "duplicate_key.yaml" else YamlSourceError)
    assert any(expected in line for line in found), found


def test_all_errors_of_a_file_are_reported_at_once() -> None:
    found = issues_of("unknown_key.yaml")
    assert found == [
        "pipelines/unknown_key.yaml:2:1: schedul: unknown key 'schedul' (did you mean 'schedule'?); expected one of: "
        "dag_id, description, schedule, start_date, catchup, max_active_runs, tags, default_args, params, storage, partitions, spark, stages",
        "pipelines/unknown_key.yaml:6:46: stages.raw.params.partitons: unknown key 'partitons' (did you mean "
        "'options'?); expected one of: " + found[1].split("expected one of: ")[1],
    ]
    assert "schema," in found[1] and "schema_" not in found[1]


def test_multi_output_stage_must_be_named_and_misspelt_output_gets_a_hint() -> None:
    found = issues_of("missing_output_name.yaml")
    assert len(found) == 2
    assert "stage 'split' has several outputs (train, test); name one" in found[0]
    assert "no output 'tset' (did you mean 'test'?)" in found[1]


def test_python_tags_are_refused_without_running_anything() -> None:
    found = issues_of("python_tag.yaml", YamlSourceError)
    assert found == [
        "pipelines/python_tag.yaml:4:13: stages.raw.params: tag 'tag:yaml.org,2002:python/object/apply:os.system' "
        "is not allowed (plain YAML only)"
    ]


def test_syntax_error_names_the_line() -> None:
    (line,) = issues_of("syntax_error.yaml", YamlSourceError)
    assert line.startswith("pipelines/syntax_error.yaml:5:") and "invalid YAML" in line


def test_templated_params_are_deferred_to_run_time() -> None:
    spec = load_spec(FIXTURES / "templated.yaml")
    assert spec.stages["balanced"].params == {"seed": "{{ params.seed }}"}


@pytest.mark.timeout(30)
def test_alias_bomb_is_refused_quickly() -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    with pytest.raises(YamlSourceError, match="alias bomb"):
        load_yaml_text("\n".join(lines), "bomb.yaml")


def test_files_over_one_megabyte_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("stages: {}\n# " + "x" * 1_100_000)
    with pytest.raises(YamlSourceError, match="larger than 1000000"):
        load_spec(big)


def test_merge_keys_work_but_explicit_duplicates_do_not() -> None:
    doc = load_yaml_text("base: &b {seed: 1, label_col: y}\nstage:\n  <<: *b\n  seed: 2\n", "m.yaml")
    assert doc.data["stage"] == {"seed": 2, "label_col": "y"}
    with pytest.raises(YamlSourceError, match="duplicate key 'seed'"):
        load_yaml_text("stage:\n  seed: 1\n  seed: 2\n", "d.yaml")


def test_max_active_runs_below_one_is_located(tmp_path: Path) -> None:
    path = write_spec(tmp_path, "dag_id: d\nmax_active_runs: 0\nstages:\n  raw: {kind: read, params: {path: x}}\n")
    with pytest.raises(SpecValidationError) as raised:
        load_spec(path)
    assert ":2:18: max_active_runs: Input should be greater than or equal to 1" in str(raised.value)
