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
