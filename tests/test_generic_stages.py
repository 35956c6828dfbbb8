"""The generic kinds on real Spark and real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CRITEO_SAMPLE
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark


def test_demo_chain_reads_balances_splits_and_exports(spark, home, tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "pipelines",
        f"""
        stages:
          raw: {{kind: read, params: {{format: tsv, path: "{CRITEO_SAMPLE}", schema: criteo}}}}
          balanced: {{kind: undersample, inputs: {{data: raw}}, params: {{label_col: label, seed: 7}}}}
          split:
            kind: split
            inputs: {{data: balanced}}
            params: {{fractions: {{train: 0.75, test: 0.25}}, seed: 1, shuffle: [train]}}
          out: {{kind: export, inputs: {{data: split.train}}, params: {{path: out/train, partitions: 3}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    raw = manifest(plan["raw"])
    assert raw["rows"] == {"data": 1000}
    assert "I13:bigint" in raw["outputs"]["data"]["schema"]
    balanced = manifest(plan["balanced"])
    assert balanced["metrics"]["class_counts_before"] == {"0": 979, "1": 21}
    counts = spark.read.parquet(plan["balanced"].output_path("data")).groupBy("label").count().collect()
    assert {r["label"]: r["count"] for r in counts} == {0: 21, 1: 21}
    split = manifest(plan["split"])
    assert split["rows"]["train"] + split["rows"]["test"] == 42
    exported = tmp_path / "storage" / "out" / "train"
    assert spark.read.parquet(str(exported)).count() == split["rows"]["train"]
    assert len(list(exported.glob("part-*.parquet"))) == 3
    assert (Path(plan["out"].checkpoint_dir) / "_SUCCESS").exists()


def _table(spark, tmp_path: Path, rows: int, classes: dict[int, float] | None = None) -> Path:
    """A Parquet table of ``rows`` rows with an id and a label drawn with the given class shares."""
    from pyspark.sql import functions as F

    df = spark.range(rows).withColumn("u", F.rand(3))
    label = F.lit(0)
    if classes:  # the first class whose cumulative share is above u
        label = F.lit(max(classes))
        for value, cumulative in reversed(list(_cumulative(classes))):
            label = F.when(F.col("u") < cumulative, F.lit(value)).otherwise(label)
    path = tmp_path / f"t{rows}"
    df.withColumn("label", label).drop("u").repartition(5).write.parquet(str(path))
    return path


def _cumulative(classes: dict[int, float]):
    edge = 0.0
    for value, share in sorted(classes.items()):
        edge += share
        yield value, edge


def test_sample_is_exact_and_nested_sizes_nest(spark, home, tmp_path: Path) -> None:
    data = _table(spark, tmp_path, 5000)
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

    data = _table(spark, tmp_path, 50)
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
    data = _table(spark, tmp_path, 4000, {0: 0.056, 1: 0.56, 2: 0.384})
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


def test_split_fractions_and_sql_views(spark, home, tmp_path: Path) -> None:
    data = _table(spark, tmp_path, 2000)
    spec = write_spec(
        tmp_path / "p",
        f"""
        stages:
          raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          split:
            kind: split
            inputs: {{data: raw}}
            params: {{fractions: {{train: 0.6, val: 0.2, test: 0.2}}, seed: 42}}
          both:
            kind: sql
            inputs: {{a: split.train, b: split.test}}
            params: {{query: "select count(*) as n, (select count(*) from b) as m from a"}}
          csv: {{kind: export, inputs: {{data: split.val}}, params: {{format: csv, path: out/val}}}}
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
    exported = spark.read.csv(str(tmp_path / "storage" / "out" / "val"), header=True)
    assert exported.count() == rows["val"] and exported.columns == ["id", "label"]


def test_read_csv_and_json_with_options(spark, home, tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("a;b\n1;x\n2;y\n")
    (tmp_path / "in.json").write_text('{"a": 1, "b": "x"}\n{"a": 2, "b": "y"}\n{"a": 3, "b": null}\n')
    spec = write_spec(
        tmp_path / "p",
        f"""
        stages:
          c: {{kind: read, params: {{format: csv, path: "{tmp_path}/in.csv", header: true, delimiter: ";", schema: "a INT, b STRING"}}}}
          j: {{kind: read, params: {{format: json, path: "{tmp_path}/*.json"}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    assert manifest(plan["c"])["outputs"]["data"] == {"type": "table", "rows": 2, "schema": "struct<a:int,b:string>"}
    assert manifest(plan["j"])["rows"] == {"data": 3}


def test_a_failing_stage_commits_nothing(spark, home, tmp_path: Path) -> None:
    from pyspark.errors import AnalysisException

    data = _table(spark, tmp_path, 10)
    spec = write_spec(
        tmp_path / "p",
        f"""
        stages:
          raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          bad: {{kind: sql, inputs: {{data: raw}}, params: {{query: "select no_such_column from data"}}}}
        """,
    )
    with pytest.raises(AnalysisException):
        load_and_run(spark, spec)
    stage_dir = tmp_path / "storage" / "pipe" / "bad"
    assert not list(stage_dir.glob("*/_SUCCESS"))
