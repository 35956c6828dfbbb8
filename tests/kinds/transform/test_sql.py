"""The sql kind, and what a failing stage leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_and_run, manifest, spec_over_table

pytestmark = pytest.mark.spark


def test_split_fractions_and_sql_views(spark, home, tmp_path: Path) -> None:
    spec = spec_over_table(
        spark,
        tmp_path,
        2000,
        """
          split:
            kind: split
            inputs: {data: raw}
            params: {fractions: {train: 0.6, val: 0.2, test: 0.2}, seed: 42}
          both:
            kind: sql
            inputs: {a: split.train, b: split.test}
            params: {query: "select count(*) as n, (select count(*) from b) as m from a"}
          csv: {kind: export, inputs: {data: split.val}, params: {format: csv, path: out/val}}
        """,
    )
    plan = load_and_run(spark, spec)
    rows = manifest(plan["split"])["rows"]
    assert set(rows) == {"train", "val", "test"} and sum(rows.values()) == 2000
    assert abs(rows["train"] - 1200) < 120
    ids = [{r.id for r in spark.read.parquet(plan["split"].output_path(n)).collect()} for n in ("train", "val", "test")]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    both = spark.read.parquet(plan["both"].output_path("data")).first()
    assert (both["n"], both["m"]) == (rows["train"], rows["test"])
    exported = spark.read.csv(str(tmp_path / "storage" / "exports" / "out" / "val"), header=True)
    assert exported.count() == rows["val"] and exported.columns == ["id", "label"]


def test_a_failing_stage_commits_nothing(spark, home, tmp_path: Path) -> None:
    from pyspark.errors import AnalysisException

    spec = spec_over_table(
        spark,
        tmp_path,
        10,
        """
          bad: {kind: sql, inputs: {data: raw}, params: {query: "select no_such_column from data"}}
        """,
    )
    with pytest.raises(AnalysisException):
        load_and_run(spark, spec)
    stage_dir = tmp_path / "storage" / "pipe" / "bad"
    assert not list(stage_dir.glob("*/_SUCCESS"))
