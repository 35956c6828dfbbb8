"""Null and unexpected labels stop samplers and trainers with the count, never a TypeError."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import StageFailedError
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark

HINT = r"; drop or fix those rows upstream \(a check stage catches them at the source: columns: \{label: \{not_null: true, in: \[0, 1\]\}\}\)$"


@pytest.fixture
def table(spark, tmp_path: Path) -> Path:
    """12 rows: features (array<double>), x, label in {0, 1}, two null labels and one 2."""
    rows = [([float(i), 1.0], float(i), i % 2) for i in range(9)]
    rows += [([9.0, 1.0], 9.0, None), ([10.0, 1.0], 10.0, None), ([11.0, 1.0], 11.0, 2)]
    path = tmp_path / "t"
    spark.createDataFrame(rows, "features array<double>, x double, label int").coalesce(1).write.parquet(str(path))
    return path


def _run(spark, folder: Path, table: Path, stage: str) -> None:
    spec = write_spec(
        folder,
        f'stages:\n  raw: {{kind: read, params: {{format: parquet, path: "{table}"}}}}\n'
        '  xs: {kind: sql, inputs: {t: raw}, params: {query: "select x, label from t"}}\n'
        f"  {stage}\n",
    )
    load_and_run(spark, spec)


def test_undersample_null_labels(spark, home, tmp_path: Path, table: Path) -> None:
    with pytest.raises(
        StageFailedError,
        match=r"^undersample: 2 of 12 rows have a null label in 'label'; drop or fill them upstream "
        r"\(a check stage catches them at the source: columns: \{label: \{not_null: true\}\}\)$",
    ):
        _run(spark, tmp_path / "p", table, "b: {kind: undersample, inputs: {data: raw}}")


def test_trainers_refuse_null_and_unexpected_labels(spark, home, tmp_path: Path, table: Path) -> None:
    problems = r"2 of 12 rows of 'train' have a null label in 'label'; 1 of 12 rows of 'train' have a label in 'label' that is not one of \[0, 1\] \(e\.g\. 2\)"
    with pytest.raises(StageFailedError, match=rf"^train_xgboost: {problems}{HINT}"):
        _run(
            spark,
            tmp_path / "x",
            table,
            "m: {kind: train_xgboost, inputs: {train: xs}, params: {features_col: null, num_round: 2}}",
        )
    with pytest.raises(StageFailedError, match=rf"^train_spark_ml: {problems}{HINT}"):
        _run(
            spark,
            tmp_path / "s",
            table,
            "m: {kind: train_spark_ml, inputs: {train: xs}, params: {model: logistic_regression, features_col: null}}",
        )
    with pytest.raises(StageFailedError, match=rf"^train_keras: {problems}{HINT}"):
        _run(
            spark,
            tmp_path / "k",
            table,
            "m: {kind: train_keras, inputs: {train: xs}, params: {architecture: logistic}}",
        )


def test_split_with_label_col_counts_classes_and_refuses_null_or_unexpected(
    spark, home, tmp_path: Path, table: Path
) -> None:
    split = "{kind: split, inputs: {data: %s}, params: {fractions: {a: 0.5, b: 0.5}, label_col: label%s}}"
    with pytest.raises(StageFailedError, match=r"^split: 2 of 12 rows have a null label in 'label'; drop or fill"):
        _run(spark, tmp_path / "n", table, "s: " + split % ("raw", ""))
    labelled = '{kind: sql, inputs: {t: raw}, params: {query: "select x, label from t where label is not null"}}'
    with pytest.raises(
        StageFailedError, match=r"^split: 1 of 10 rows have a label in 'label' that is not one of \[0, 1\] \(e\.g\. 2\)"
    ):
        _run(spark, tmp_path / "c", table, f"l: {labelled}\n  s: " + split % ("l", ", classes: [0, 1]"))
    spec = write_spec(
        tmp_path / "ok",
        f'stages:\n  raw: {{kind: read, params: {{format: parquet, path: "{table}"}}}}\n'
        f"  l: {labelled}\n  s: " + split % ("l", ", classes: [0, 1, 2]") + "\n",
    )
    plan = load_and_run(spark, spec)
    assert manifest(plan["s"])["metrics"]["class_counts"] == {"0": 5, "1": 4, "2": 1}
