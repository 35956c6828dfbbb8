"""A scoring stage's code hash covers the flavor modules it can run, through the static registry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

import dagspec
from dagspec.kinds.model_card import Flavor
from dagspec.plan.fingerprint import code_hashes
from dagspec.plan.reasons import key_changes

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "pipelines" / "topology_classifier.yaml"
PLAN = """
import json, sys
from pathlib import Path
import dagspec
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
spec = load_spec(Path(sys.argv[1]))
plan = resolve_pipeline(spec, default_context(spec), home=Path(sys.argv[2]), storage_root=sys.argv[3])
print(json.dumps({"dagspec": dagspec.__file__, "stages": {n: {"kind": s.kind, "key": s.key} for n, s in plan.items()}}))
"""


def test_the_registry_lists_every_flavor_a_model_card_may_name() -> None:
    from dagspec.kinds.scoring.flavors import FLAVORS

    assert sorted(FLAVORS) == sorted(get_args(Flavor))
    assert all(module.__name__ == f"dagspec.kinds.scoring.flavor_{name}" for name, module in FLAVORS.items())


@pytest.mark.parametrize("kind", ["predict", "evaluate"])
def test_the_scoring_kinds_hash_every_registered_flavor(kind: str) -> None:
    from dagspec.kinds.scoring.flavors import FLAVORS

    hashed = code_hashes(f"dagspec.kinds.scoring.{kind}")
    assert {m.__name__ for m in FLAVORS.values()} <= set(hashed)
    assert "dagspec.kinds.training.keras_inputs" in hashed  # what the keras flavor encodes inputs with


def _plan(src: Path, home: Path) -> dict[str, Any]:
    """The shipped spec's plan, keyed by a checkout whose dagspec package is ``src/dagspec``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", PLAN, str(SPEC), str(home), str(home / "store")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    plan: dict[str, Any] = json.loads(done.stdout)
    assert plan["dagspec"] == str(src / "dagspec" / "__init__.py")
    return plan["stages"]


def test_editing_a_flavor_changes_the_fingerprints_of_predict_and_evaluate_stages_only(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(Path(dagspec.__file__).parent, src / "dagspec", ignore=shutil.ignore_patterns("__pycache__"))
    before = _plan(src, tmp_path)

    flavor = src / "dagspec" / "kinds" / "scoring" / "flavor_keras.py"
    flavor.write_text(flavor.read_text().replace("DEFAULT_BATCH_SIZE = 1024", "DEFAULT_BATCH_SIZE = 512"))
    after = _plan(src, tmp_path)

    recoded = {name for name in before if before[name]["key"]["code"] != after[name]["key"]["code"]}
    # compare imports evaluate's report names, so it hashes what evaluate runs too
    assert {before[n]["kind"] for n in recoded} == {"evaluate", "compare", "predict"}
    assert {before[n]["kind"] for n in before if n not in recoded} >= {"train_keras", "gate", "export", "check"}
    for name in recoded:
        assert "code changed: dagspec.kinds.scoring.flavor_keras (edited)" in key_changes(
            before[name]["key"], after[name]["key"]
        )
