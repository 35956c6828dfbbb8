"""evaluate and compare with real Keras models, real Spark and the real commit protocol.

The models, their data and the ``test_saved_model`` kind are in this folder's ``conftest.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from sklearn.metrics import accuracy_score, confusion_matrix, roc_auc_score

from dagspec.errors import SpecValidationError, StageFailedError
from dagspec.kinds.base import StageContext
from dagspec.kinds.scoring.compare import CompareParams, compare
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("saved_model_kind")]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _report(stage: Any, name: str) -> Path:
    return Path(stage.output_path(name))


def test_evaluate_and_compare_match_sklearn(spark, home, tmp_path, keras_models, events_parquet) -> None:
    dirs = keras_models["dirs"]
    spec = write_spec(
        tmp_path / "pipelines",
        f"""
        stages:
          dense_model: {{kind: test_saved_model, params: {{path: "{dirs["dense"]}"}}}}
          weak_model: {{kind: test_saved_model, params: {{path: "{dirs["weak"]}"}}}}
          click_model: {{kind: test_saved_model, params: {{path: "{dirs["binary"]}"}}}}
          events: {{kind: read, params: {{format: parquet, path: "{events_parquet}"}}}}
          eval_dense: {{kind: evaluate, inputs: {{model: dense_model, data: events}}, params: {{key_col: event_id}}}}
          eval_weak:
            kind: evaluate
            inputs: {{model: weak_model, data: events}}
            params: {{batch_size: 256, key_col: event_id}}
          eval_click: {{kind: evaluate, inputs: {{model: click_model, data: events}}}}
          models:
            kind: compare
            inputs: {{dense: eval_dense, weak: eval_weak}}
            params: {{sort_by: log_loss, title: topology models}}
        """,
    )
    plan = load_and_run(spark, spec)
    label = keras_models["label"]

    dense = json.loads((_report(plan["eval_dense"], "report") / "metrics.json").read_text())
    reference = keras_models["reference"]["dense"]
    assert dense["rows"] == 3000 and dense["task"] == "multiclass" and dense["model"] == "dense_model"
    for c in range(3):
        assert dense["roc_auc_per_class"][str(c)] == pytest.approx(roc_auc_score(label == c, reference[:, c]), abs=1e-4)
    macro = roc_auc_score(label, reference / reference.sum(1, keepdims=True), multi_class="ovr")
    assert dense["roc_auc"] == pytest.approx(macro, abs=1e-4)
    expected_loss = -np.mean(np.log(np.clip(reference[np.arange(3000), label], 1e-15, 1 - 1e-15)))
    assert dense["log_loss"] == pytest.approx(expected_loss, abs=1e-5)
    # Spark's argmax may differ from numpy's only where the top two probabilities are within float
    # noise (measured: no such row, the smallest gap is 4e-5): elsewhere both must agree exactly
    top = np.sort(reference, 1)
    near_ties = int((top[:, -1] - top[:, -2] < 1e-5).sum())
    assert dense["accuracy"] == pytest.approx(accuracy_score(label, reference.argmax(1)), abs=near_ties / 3000 + 1e-12)
    matrix = np.array(dense["confusion_matrix"]["matrix"])
    assert matrix.sum() == 3000
    assert np.abs(matrix - confusion_matrix(label, reference.argmax(1))).sum() <= 2 * near_ties
    assert (dense["train_time_s"], dense["peak_memory_mb"], dense["cpu_load"]) == (1.5, 300.0, 1.2)
    assert manifest(plan["eval_dense"])["metrics"]["roc_auc"] == dense["roc_auc"]
    figure = _report(plan["eval_dense"], "report") / "roc.png"
    assert figure.read_bytes()[:8] == PNG_MAGIC and figure.stat().st_size > 10_000
    curves = json.loads((_report(plan["eval_dense"], "report") / "roc.json").read_text())["curves"]
    # curve_points (default 1000) and the two ends: measured 1001 points per class
    assert sorted(curves) == ["0", "1", "2"] and all(990 <= len(c["fpr"]) <= 1010 for c in curves.values())

    click = manifest(plan["eval_click"])["metrics"]
    p1 = keras_models["reference"]["binary"]
    assert click["task"] == "binary" and list(click["roc_auc_per_class"]) == ["1"]
    assert click["roc_auc"] == pytest.approx(roc_auc_score(keras_models["clicked"], p1), abs=1e-4)
    assert click["train_time_s"] is None  # the model.json has none: reported as missing, not as 0

    table = (_report(plan["models"], "report") / "comparison.tsv").read_text().splitlines()
    header = table[0].split("\t")
    assert header[:5] == ["model", "stage", "flavor", "rows", "roc_auc"]
    assert "auc_W+jets" in header and "train_time_s" in header
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in table[1:]]
    assert sorted(r["model"] for r in rows) == ["dense", "weak"]
    assert [float(r["log_loss"]) for r in rows] == sorted(float(r["log_loss"]) for r in rows)
    by_model = {r["model"]: r for r in rows}
    assert float(by_model["dense"]["roc_auc"]) == pytest.approx(dense["roc_auc"], abs=1e-8)
    weak = keras_models["reference"]["weak"]
    weak_macro = roc_auc_score(label, weak / weak.sum(1, keepdims=True), multi_class="ovr")
    assert float(by_model["weak"]["roc_auc"]) == pytest.approx(weak_macro, abs=1e-4)
    assert by_model["weak"]["train_time_s"] == "0.50000000"
    markdown = (_report(plan["models"], "report") / "comparison.md").read_text()
    assert markdown.startswith("# topology models") and "| dense | dense_model | keras | 3000 |" in markdown

    # intervals: DeLong's around every AUC, the bootstrap's around accuracy and log loss; in the table too
    for key, auc in dense["roc_auc_per_class"].items():
        low, high = dense["roc_auc_per_class_ci"][key]
        assert low < auc < high and high - low < 0.1, key
    for name in ("roc_auc", "accuracy", "log_loss"):
        low, high = dense[f"{name}_ci"]
        assert low < dense[name] < high, name
    assert dense["intervals"]["level"] == 0.95 and dense["placements"] == "placements"
    low, high = dense["roc_auc_ci"]
    assert f"| {dense['roc_auc']:.4f} [{low:.4f}, {high:.4f}] |" in markdown
    assert float(by_model["dense"]["roc_auc_low"]) == pytest.approx(low, abs=1e-8)
    # the paired DeLong tests, per class: the dense network beats the linear one on class 1 (x1 * x2)
    tests = json.loads((_report(plan["models"], "report") / "paired_tests.json").read_text())
    assert [(t["model"], t["against"], t["class"]) for t in tests] == [("dense", "weak", str(c)) for c in range(3)]
    tt = tests[1]
    assert tt["difference"] == pytest.approx(
        dense["roc_auc_per_class"]["1"] - by_model_auc(plan, "eval_weak"), abs=1e-9
    )
    assert tt["difference"] > 0 and tt["significant"] and tt["p_value"] < 1e-3
    assert (
        "## Paired tests of the ROC AUC (DeLong, on the same rows)" in markdown and "| dense | weak | tt |" in markdown
    )
    assert (_report(plan["models"], "report") / "roc.png").read_bytes()[:8] == PNG_MAGIC
    # one ROC panel per class, titled by the class names the model cards carry (not 0, 1, 2)
    panels = Image.open(_report(plan["models"], "report") / "roc.png").info["Description"]
    assert re.findall(r"(?:^|; )([^:;]+):", panels) == ["QCD", "tt", "W+jets"]

    # reports over different classes cannot share a table: the function itself refuses them, before
    # it writes anything
    context = StageContext(
        spark=spark,
        dag_id="pipe",
        stage_name="mixed",
        fingerprint="mixed",
        home=REPO,
        storage_root=str(tmp_path / "storage"),
        work_dir=str(tmp_path / "mixed"),
        scratch_root=str(tmp_path / "scratch"),
    )
    mixed = {
        "dense": plan["eval_dense"].output_path("report"),
        "click": plan["eval_click"].output_path("report"),
    }
    with pytest.raises(
        StageFailedError, match=r"reports disagree on the classes: 'dense' has \[0, 1, 2\], 'click' has \[0, 1\]"
    ):
        compare(mixed, CompareParams(), context)
    assert not (tmp_path / "mixed").exists()


def by_model_auc(plan: Any, stage: str) -> float:
    """The class-1 ROC AUC of an evaluate stage's report."""
    metrics = json.loads((_report(plan[stage], "report") / "metrics.json").read_text())
    return float(metrics["roc_auc_per_class"]["1"])


def test_compare_inputs_must_be_files_outputs(home, tmp_path) -> None:
    spec = write_spec(
        tmp_path / "pipelines",
        """
        stages:
          events: {kind: read, params: {format: parquet, path: data/x}}
          models: {kind: compare, inputs: {a: events}}
        """,
    )
    with pytest.raises(SpecValidationError, match="'events' is table but this input expects files"):
        load_spec(spec)
