"""undersample, split and sample on real Spark and real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_and_run, manifest, parquet_table, write_spec

pytestmark = pytest.mark.spark


def test_sample_is_exact_and_nested_sizes_nest(spark, home, tmp_path: Path) -> None:
    data = parquet_table(spark, tmp_path, 5000)
    spec = write_spec(
        tmp_path / "p",
        f"""
        stages:
          raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          one: {{kind: sample, inputs: {{data: raw}}, params: {{n: 1234, seed: 5}}}}
          nested: {{kind: sample, inputs: {{data: raw}}, params: {{sizes: [10, 300, 3000], seed: 5}}}}
          indep: {{kind: sample, inputs: {{data: raw}}, params: {{sizes: [10, 300], nested: false, seed: 5}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    assert manifest(plan["one"])["rows"] == {"data": 1234}
    assert manifest(plan["nested"])["rows"] == {"n10": 10, "n300": 300, "n3000": 3000}
    ids = {
        name: {r.id for r in spark.read.parquet(plan["nested"].output_path(name)).select("id").collect()}
        for name in ("n10", "n300", "n3000")
    }
    assert ids["n10"] < ids["n300"] < ids["n3000"]
    assert manifest(plan["indep"])["rows"] == {"n10": 10, "n300": 300}
    one = spark.read.parquet(plan["one"].output_path("data"))
    assert one.select("id").distinct().count() == 1234  # no row twice


def test_sample_refuses_more_rows_than_the_input_has(spark, home, tmp_path: Path) -> None:
    from dagspec.errors import StageFailedError

    data = parquet_table(spark, tmp_path, 50)
    spec = write_spec(
        tmp_path / "p",
        f"""
        stages:
          raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          big: {{kind: sample, inputs: {{data: raw}}, params: {{n: 51}}}}
        """,
    )
    with pytest.raises(StageFailedError, match="asked 51, have 50"):
        load_and_run(spark, spec)


def test_undersample_to_minority_and_to_explicit_counts(spark, home, tmp_path: Path) -> None:
    data = parquet_table(spark, tmp_path, 4000, {0: 0.056, 1: 0.56, 2: 0.384})
    spec = write_spec(
        tmp_path / "p",
        f"""
        stages:
          raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          minority: {{kind: undersample, inputs: {{data: raw}}, params: {{seed: 1}}}}
          explicit: {{kind: undersample, inputs: {{data: raw}}, params: {{target_counts: {{"1": 100, "2": 50}}}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    before = manifest(plan["minority"])["metrics"]["class_counts_before"]
    minority = min(before.values())
    counts = {
        r["label"]: r["count"]
        for r in spark.read.parquet(plan["minority"].output_path("data")).groupBy("label").count().collect()
    }
    assert counts == {0: minority, 1: minority, 2: minority}
    explicit = {
        r["label"]: r["count"]
        for r in spark.read.parquet(plan["explicit"].output_path("data")).groupBy("label").count().collect()
    }
    assert explicit == {1: 100, 2: 50}
