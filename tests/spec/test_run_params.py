"""`-p name=value` at `dagspec show` / `run`: checked against the param's declaration, unknown names get a hint."""

from __future__ import annotations

import os
import subprocess

import pytest

from dagspec.errors import DagspecError
from dagspec.local.project import parse_overrides
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import DAGSPEC

SPEC = REPO / "pipelines" / "ctr_demo.yaml"


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC, "pipelines/ctr_demo.yaml")


def test_a_value_of_the_declared_type_is_parsed(spec) -> None:
    assert parse_overrides(["test_fraction=0.3", "input=a.tsv", "force=true"], spec) == {
        "test_fraction": 0.3,
        "input": "a.tsv",
        "force": True,
    }


def test_a_value_of_another_type_names_the_declaration(spec) -> None:
    with pytest.raises(DagspecError) as raised:
        parse_overrides(["test_fraction=abc"], spec)
    assert str(raised.value) == (
        "pipelines/ctr_demo.yaml:12:3: params.test_fraction: -p test_fraction=abc does not fit the param's "
        "declaration: 'abc' is not of type 'number'"
    )


def test_a_value_out_of_bounds_names_the_bound(spec) -> None:
    with pytest.raises(DagspecError, match=r"ctr_demo.yaml:12:3: .*1.5 is greater than the maximum of 0.9"):
        parse_overrides(["test_fraction=1.5"], spec)


def test_an_unknown_name_gets_did_you_mean_at_the_command_line() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC"))}
    done = subprocess.run(
        [DAGSPEC, "show", str(SPEC), "-p", "test_fractoin=0.3"],
        env={**env, "DAGSPEC_HOME": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode != 0
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "unknown param 'test_fractoin' for ctr_demo (did you mean 'test_fraction'?); params: input, test_fraction"
        )
    )
