"""Matrix fan-out: expansions, inheritance, fan-in, values from params, and the errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import write_spec

ISSUE_EXAMPLE = """
stages:
  raw: {kind: read, params: {format: parquet, path: data/in}}
  few:
    kind: sample
    matrix: {n: [3, 5, 7]}
    inputs: {data: raw}
    params: {n: "{{ matrix.n }}", seed: 1}
  out:
    kind: export
    inputs: {data: few}
    params: {path: "m/n{{ matrix.n }}"}
"""


def issues(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecValidationError) as info:
        load_spec(write_spec(tmp_path, text))
    return [str(i).split(": ", 1)[1] for i in info.value.issues]


def test_one_stage_per_value_wired_to_the_matching_expansion(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, ISSUE_EXAMPLE))
    assert list(spec.stages) == ["raw", "few__3", "few__5", "few__7", "out__3", "out__5", "out__7"]
    assert spec.stages["out__5"].inputs == {"data": "few__5"}
    assert spec.stages["few__7"].params == {"n": "{{ matrix.n }}", "seed": 1}  # rendered per run
    assert spec.matrix_of("out__7") == {"n": 7} and spec.written_stage("out__7") == "out"
    assert spec.matrix_groups() == {"few": ["few__3", "few__5", "few__7"], "out": ["out__3", "out__5", "out__7"]}
    assert spec.matrix_of("raw") == {} and spec.written_stage("raw") == "raw"


def test_own_and_inherited_keys_multiply_and_fan_in_takes_every_expansion(tmp_path: Path) -> None:
    spec = load_spec(
        write_spec(
            tmp_path,
            """
            params:
              sizes: {type: array, default: [10, 20]}
            stages:
              raw: {kind: read, params: {format: parquet, path: data/in}}
              sample: {kind: sample, matrix: {size: "{{ params.sizes }}"}, inputs: {data: raw}, params: {n: "{{ matrix.size }}"}}
              model:
                kind: train_spark_ml
                matrix: {algo: [logistic_regression, random_forest]}
                inputs: {train: sample}
                params: {model: "{{ matrix.algo }}"}
              scores: {kind: evaluate, inputs: {model: model, data: raw}}
              table: {kind: compare, inputs: {m: scores}}
            """,
        )
    )
    assert spec.matrix_groups()["model"] == [
        "model__10__logistic_regression",
        "model__10__random_forest",
        "model__20__logistic_regression",
        "model__20__random_forest",
    ]
    assert spec.stages["model__20__random_forest"].inputs == {"train": "sample__20"}
    assert spec.stages["scores__10__random_forest"].inputs == {"model": "model__10__random_forest", "data": "raw"}
    assert spec.stages["table"].inputs == {
        f"m__{size}__{algo}": f"scores__{size}__{algo}"
        for size in (10, 20)
        for algo in ("logistic_regression", "random_forest")
    }
    assert spec.matrix_params() == {"sizes": [10, 20]}


def test_the_shipped_criteo_spec_keeps_its_tasks_and_report(tmp_path: Path) -> None:
    spec = load_spec(REPO / "pipelines" / "criteo_ctr.yaml")
    text = (REPO / "pipelines" / "criteo_ctr.yaml").read_text()
    assert len(text.splitlines()) <= 111 // 2
    benchmark = set(spec.stages) - {"train_checked", "best_gate"}  # the two #13 stages: data and model checks
    assert len(benchmark) == 45  # 46 until the two day readers became one partitioned stage (days)
    assert sorted(spec.stages["report"].inputs) == sorted(
        f"{engine}__{size}"
        for engine in ("xgb_single", "xgb_spark", "lr", "rf", "vw")
        for size in (10000, 30000, 100000)
    )
    # adding a train size is one list entry: a sample, two feature sets, five models and their evaluations
    bigger = write_spec(
        tmp_path, text.replace("default: [10000, 30000, 100000]", "default: [10000, 30000, 100000, 300000]")
    )
    more = load_spec(bigger)
    assert len(more.stages) == len(spec.stages) + 13 and len(more.stages["report"].inputs) == 20


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        ("{n: []}", "stages.few.matrix.n: a matrix key needs at least one value"),
        ("{n: [a.b, a_b]}", "values ['a.b', 'a_b'] are not distinct in task ids (a_b, a_b)"),
        ("{n: '{{ params.nope }}'}", "stages.few.matrix.n: unknown param 'nope' (params: k)"),
        ("{n: '{{ params.k }}'}", "param 'k' must default to a list of strings or numbers, got 3"),
        ("{n: '{{ 1 + 2 }}'}", "a matrix entry is a list of values or '{{ params.NAME }}', got '{{ 1 + 2 }}'"),
        ("{n-x: [1]}", "matrix key 'n-x' must be an identifier"),
        ("{}", "stages.few.matrix: a matrix needs at least one key"),
    ],
)
def test_bad_matrices_are_located_and_explained(tmp_path: Path, matrix: str, expected: str) -> None:
    text = f"""
    params:
      k: {{type: integer, default: 3}}
    stages:
      raw: {{kind: read, params: {{format: parquet, path: data/in}}}}
      few: {{kind: sample, matrix: {matrix}, inputs: {{data: raw}}, params: {{n: 1}}}}
    """
    found = issues(tmp_path, text)
    assert any(expected in line for line in found), found


def test_a_collision_and_inconsistent_inherited_values_are_refused(tmp_path: Path) -> None:
    found = issues(
        tmp_path,
        """
        stages:
          raw: {kind: read, params: {format: parquet, path: data/in}}
          few: {kind: sample, matrix: {n: [1, 2]}, inputs: {data: raw}, params: {n: "{{ matrix.n }}"}}
          few__1: {kind: sample, inputs: {data: raw}, params: {n: 1}}
          other: {kind: sample, matrix: {n: [1, 3]}, inputs: {data: raw}, params: {n: "{{ matrix.n }}"}}
          both: {kind: sql, inputs: {a: few, b: other}, params: {query: select 1}}
        """,
    )
    assert "stages.few: expansion 'few__1' collides with stage 'few__1'; rename one" in found
    assert (
        "stages.both.inputs.b: inherits matrix key 'n' = [1, 3] from 'other' but [1, 2] from 'few'; "
        "the values must be the same" in found
    )


def test_a_template_error_of_every_expansion_is_said_once_with_its_values(tmp_path: Path) -> None:
    found = issues(tmp_path, ISSUE_EXAMPLE.replace('"m/n{{ matrix.n }}"', '"m/{{ 10 // (matrix.n - 5) }}"'))
    assert found == [
        "stages.out.params.path: cannot render 'm/{{ 10 // (matrix.n - 5) }}': integer division or modulo by zero "
        "(ZeroDivisionError) (matrix n=5)"
    ]
