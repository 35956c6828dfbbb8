"""The gate kind on real trained models: XGBoost and Spark ML trained here, evaluated, gated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagspec.errors import StageFailedError
from dagspec.kinds.quality.gate import GateParams, judge, metric_intervals, metric_values
from tests.helpers import load_and_run, manifest, write_spec
from tests.kinds.reports import evaluation_report

pytestmark = pytest.mark.spark


def labelled(spark, path: Path, rows: int, seed: int, null_labels: int = 0) -> Path:
    """x1 (informative), x2 (weakly), label in {0, 1}; the first ``null_labels`` rows have no label."""
    from pyspark.sql import functions as F

    df = spark.range(rows).select(
        "id", F.randn(seed).alias("x1"), F.randn(seed + 1).alias("x2"), F.randn(seed + 2).alias("noise")
    )
    label = (F.col("x1") + 0.3 * F.col("x2") + 0.8 * F.col("noise") > 0).cast("int")
    df = df.select("id", "x1", "x2", F.when(F.col("id") >= null_labels, label).alias("label"))
    df.coalesce(2).write.parquet(str(path))
    return path


STAGES = """
stages:
  train_rows: {{kind: read, params: {{format: parquet, path: "{train}"}}}}
  test_rows: {{kind: read, params: {{format: parquet, path: "{test}"}}}}
  train_features: {{kind: sql, inputs: {{t: train_rows}}, params: {{query: "select x1, x2, label from t"}}}}
  weak_features: {{kind: sql, inputs: {{t: train_rows}}, params: {{query: "select x2, label from t"}}}}
  model: {{kind: train_xgboost, inputs: {{train: train_features}}, params: {{num_round: 20, max_depth: 3, min_child_weight: 1, nthread: 1}}}}
  weak: {{kind: train_spark_ml, inputs: {{train: weak_features}}, params: {{model: logistic_regression, features_col: null}}}}
  eval_model: {{kind: evaluate, inputs: {{model: model, data: test_rows}}}}
  eval_weak: {{kind: evaluate, inputs: {{model: weak, data: test_rows}}}}
"""


@pytest.fixture
def data(spark, tmp_path: Path) -> dict[str, Path]:
    return {
        "train": labelled(spark, tmp_path / "train", 2000, 1),
        "test": labelled(spark, tmp_path / "test", 1000, 2),
        "nulls": labelled(spark, tmp_path / "nulls", 100, 3, null_labels=4),
    }


def test_gate_passes_a_good_model_and_stops_a_bad_one(spark, home, tmp_path: Path, data: dict[str, Path]) -> None:
    stages = STAGES.format(**data)
    passing = (
        stages
        + """
  blessed: {kind: gate, inputs: {report: eval_model, model: model}, params: {metric: roc_auc, min: 0.75}}
  per_class: {kind: gate, inputs: {report: eval_model, baseline: eval_weak}, params: {metric: roc_auc_per_class, max_regression: 0.0}}
  scored: {kind: predict, inputs: {model: blessed, data: test_rows}, params: {key_col: id}}
"""
    )
    plan = load_and_run(spark, write_spec(tmp_path / "p", passing))
    auc = manifest(plan["eval_model"])["metrics"]["roc_auc"]
    weak_auc = manifest(plan["eval_weak"])["metrics"]["roc_auc"]
    assert auc > 0.8 and weak_auc < auc - 0.1
    blessed = Path(plan["blessed"].output_path("model"))
    verdict = json.loads((blessed / "gate.json").read_text())
    assert verdict["passed"] and verdict["values"] == {"roc_auc": auc} and verdict["model"] == "model"
    assert (blessed / "model.json").is_file() and (blessed / "booster.json").is_file()
    assert manifest(plan["per_class"])["metrics"]["values"] == {"roc_auc_per_class[1]": auc}
    assert manifest(plan["scored"])["rows"] == {"data": 1000}

    failing = (
        stages
        + """
  blessed: {kind: gate, inputs: {report: eval_model, model: model}, params: {metric: roc_auc, min: 0.99}}
  scored: {kind: predict, inputs: {model: blessed, data: test_rows}, params: {key_col: id}}
"""
    )
    with pytest.raises(StageFailedError) as failed:
        load_and_run(spark, write_spec(tmp_path / "q", failing))
    assert str(failed.value) == f"gate: the model of 'model' does not pass:\n  roc_auc: {auc:.4f} < min 0.99"
    # the predictions of the model that passed are the only ones ever committed
    assert len(list((tmp_path / "storage" / "pipe" / "scored").glob("*/_SUCCESS"))) == 1

    regressed = (
        stages
        + """
  challenger: {kind: gate, inputs: {report: eval_weak, baseline: eval_model}, params: {max_regression: 0.02}}
"""
    )
    with pytest.raises(StageFailedError) as failed:
        load_and_run(spark, write_spec(tmp_path / "r", regressed))
    assert str(failed.value) == (
        f"gate: the model of 'weak' does not pass:\n  roc_auc: {weak_auc:.4f} < baseline {auc:.4f} - "
        f"max_regression 0.02 = {auc - 0.02:.4f}"
    )


def test_null_labels_fail_evaluate_with_the_count(spark, home, tmp_path: Path, data: dict[str, Path]) -> None:
    spec = (
        STAGES.format(**data)
        + f"""
  null_rows: {{kind: read, params: {{format: parquet, path: "{data["nulls"]}"}}}}
  eval_nulls: {{kind: evaluate, inputs: {{model: model, data: null_rows}}}}
"""
    )
    with pytest.raises(
        StageFailedError,
        match=r"^evaluate: 4 of 100 rows have a null label in 'label'; drop or fix those rows before evaluating$",
    ):
        load_and_run(spark, write_spec(tmp_path / "p", spec))


def test_per_class_bounds_of_a_multiclass_report() -> None:
    report = evaluation_report(
        (0, 1, 2),
        class_names={"0": "QCD", "1": "tt", "2": "W+jets"},
        roc_auc=0.76,
        roc_auc_per_class={"0": 0.80, "1": 0.82, "2": 0.67},
    )
    params = GateParams.model_validate({"metric": "roc_auc_per_class", "min": 0.7})
    values = metric_values(report, params)
    assert values == {"roc_auc_per_class[QCD]": 0.80, "roc_auc_per_class[tt]": 0.82, "roc_auc_per_class[W+jets]": 0.67}
    assert judge(values, {}, params) == ["roc_auc_per_class[W+jets]: 0.6700 < min 0.7"]
    only = GateParams.model_validate({"metric": "roc_auc_per_class", "min": 0.7, "classes": ["tt", "0"]})
    assert judge(metric_values(report, only), {}, only) == []
    with pytest.raises(ValueError, match="a gate needs min, max, max_regression or better_than_baseline"):
        GateParams.model_validate({"metric": "roc_auc"})


def test_a_gate_on_the_lower_bound_refuses_a_model_whose_value_passes() -> None:
    report = evaluation_report(roc_auc=0.83, roc_auc_ci=[0.80, 0.86], roc_auc_per_class={"1": 0.83})
    on_value = GateParams.model_validate({"metric": "roc_auc", "min": 0.82})
    on_low = GateParams.model_validate({"metric": "roc_auc", "min": 0.82, "bound": "low"})
    values = metric_values(report, on_low)
    assert judge(values, {}, on_value, metric_intervals(report, on_value)) == []
    assert judge(values, {}, on_low, metric_intervals(report, on_low)) == [
        "roc_auc: low 0.8000 of 0.8300 [0.8000, 0.8600] < min 0.82"
    ]
    # a report without intervals cannot pass a gate on a bound
    bare = evaluation_report(roc_auc=0.83)
    assert judge(metric_values(bare, on_low), {}, on_low, metric_intervals(bare, on_low)) == [
        "roc_auc: the report has no confidence interval (evaluated without intervals, or fewer than 2 rows of a class)"
    ]
    with pytest.raises(ValueError, match="bound: low needs a metric with intervals"):
        GateParams.model_validate({"metric": "recall_per_class", "min": 0.5, "bound": "low"})
    with pytest.raises(ValueError, match="better_than_baseline tests the ROC AUC"):
        GateParams.model_validate({"metric": "accuracy", "better_than_baseline": True})


def test_gates_on_the_interval_and_the_paired_test(spark, home, tmp_path: Path, data: dict[str, Path]) -> None:
    stages = (
        STAGES.format(**data)
        + """
  keyed_model: {kind: evaluate, inputs: {model: model, data: test_rows}, params: {key_col: id}}
  keyed_weak: {kind: evaluate, inputs: {model: weak, data: test_rows}, params: {key_col: id}}
"""
    )
    passing = (
        stages
        + """
  better: {kind: gate, inputs: {report: keyed_model, baseline: keyed_weak}, params: {better_than_baseline: true}}
"""
    )
    plan = load_and_run(spark, write_spec(tmp_path / "p", passing))
    report = manifest(plan["keyed_model"])["metrics"]
    auc, (low, high) = report["roc_auc"], report["roc_auc_ci"]
    assert low < auc < high and report["intervals"]["level"] == 0.95
    test = manifest(plan["better"])["metrics"]["paired_tests"]["roc_auc"]
    assert test["significant"] and test["difference"] > 0.1 and test["p_value"] < 1e-6

    # the point estimate passes min, the interval's lower end does not
    threshold = round((low + auc) / 2, 4)
    on_value = stages + f"  on_value: {{kind: gate, inputs: {{report: keyed_model}}, params: {{min: {threshold}}}}}\n"
    assert manifest(load_and_run(spark, write_spec(tmp_path / "v", on_value))["on_value"])["metrics"]["passed"]
    on_low = (
        stages
        + f"  on_low: {{kind: gate, inputs: {{report: keyed_model}}, params: {{min: {threshold}, bound: low}}}}\n"
    )
    with pytest.raises(StageFailedError) as failed:
        load_and_run(spark, write_spec(tmp_path / "q", on_low))
    assert str(failed.value) == (
        f"gate: the model of 'model' does not pass:\n  roc_auc: low {low:.4f} of {auc:.4f} [{low:.4f}, {high:.4f}] "
        f"< min {threshold}"
    )

    worse = (
        stages
        + """
  worse: {kind: gate, inputs: {report: keyed_weak, baseline: keyed_model}, params: {better_than_baseline: true}}
"""
    )
    with pytest.raises(StageFailedError, match=r"roc_auc: 0\.\d{4} is not significantly better than the baseline's"):
        load_and_run(spark, write_spec(tmp_path / "r", worse))
    # a baseline evaluated without key_col has no per-row placements to pair
    unpaired = (
        stages
        + """
  unpaired: {kind: gate, inputs: {report: keyed_model, baseline: eval_weak}, params: {better_than_baseline: true}}
"""
    )
    with pytest.raises(StageFailedError, match="has no per-row placements: set key_col on its evaluate stage"):
        load_and_run(spark, write_spec(tmp_path / "s", unpaired))
