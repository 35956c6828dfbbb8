"""The check stages of the shipped pipelines pass on the pipelines' own data (and would stop bad data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import manifest, run_stages

pytestmark = pytest.mark.spark


def _run_stages(spark, spec_name: str, stages: list[str], params: dict | None = None) -> dict:
    plan = run_stages(spark, load_spec(REPO / "pipelines" / spec_name), stages, params)
    return {name: manifest(plan[name]) for name in stages}


def test_ctr_demo_checks_its_input(spark, home, tmp_path: Path) -> None:
    found = _run_stages(spark, "ctr_demo.yaml", ["raw", "raw_checked"])
    assert found["raw"]["metrics"]["rejected"] == 0
    checked = found["raw_checked"]["metrics"]
    assert checked["violations"] == 0 and checked["check_rows"] == 1000
    assert {(r["column"], r["rule"]) for r in checked["results"]} == {
        ("rows", "min 100"),
        ("label", "not_null"),
        ("label", "in [0, 1]"),
    }


def test_topology_classifier_checks_its_features(spark, home, tmp_path: Path) -> None:
    found = _run_stages(spark, "topology_classifier.yaml", ["events", "features", "features_checked"], {"events": 300})
    checked = found["features_checked"]["metrics"]
    assert checked["violations"] == 0 and checked["check_rows"] == 300, checked["results"]
    by_rule = {(r["column"], r["rule"]): r["observed"] for r in checked["results"]}
    assert by_rule[("HLF_input", "min 0")] == "min 0" and by_rule[("HLF_input", "max 1")] == "max 1"
    assert by_rule[("label", "in [0, 1, 2]")] == "none outside"
