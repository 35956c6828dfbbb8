"""The read and export kinds on real Spark and real files."""

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
    exported = tmp_path / "storage" / "exports" / "out" / "train"
    assert spark.read.parquet(str(exported)).count() == split["rows"]["train"]
    assert len(list(exported.glob("part-*.parquet"))) == 3
    assert (Path(plan["out"].checkpoint_dir) / "_SUCCESS").exists()


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
