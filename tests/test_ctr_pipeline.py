"""pipelines/criteo_ctr.yaml end to end on the real Criteo sample (small sizes), in-process."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dagspec.spec import load_spec
from tests.conftest import CRITEO_SAMPLE, REPO
from tests.helpers import manifest, run_pipeline_in_process

pytestmark = pytest.mark.spark


def test_criteo_ctr_pipeline_on_the_real_sample(spark, home, tmp_path: Path) -> None:
    # two "days" cut from the real sample: the first 700 lines train, the last 300 test
    lines = CRITEO_SAMPLE.read_bytes().splitlines(keepends=True)
    days = tmp_path / "criteo"
    days.mkdir()
    (days / "day_00.tsv").write_bytes(b"".join(lines[:700]))
    (days / "day_01.tsv").write_bytes(b"".join(lines[700:]))
    spec = load_spec(REPO / "pipelines" / "criteo_ctr.yaml")
    params = {
        "input": f"{days}/day_*.tsv",
        "sizes": [100, 200, 400],
        "test_rows": 250,
        "hash_bits": 12,
        "xgb_rounds": 8,
        "rf_trees": 4,
        "engines": ["xgb_single", "xgb_spark", "lr", "rf"],
    }
    plan = run_pipeline_in_process(spark, spec, params)
    assert manifest(plan["train_days"])["rows"] == {"data": 700}
    assert manifest(plan["test"])["rows"] == {"data": 250}
    assert [manifest(plan[s])["rows"]["data"] for s in ("s1", "s2", "s3")] == [100, 200, 400]
    # nested: the 100-row sample is inside the 200-row one
    s1 = spark.read.parquet(plan["s1"].output_path("data"))
    s2 = spark.read.parquet(plan["s2"].output_path("data"))
    assert s1.exceptAll(s2).count() == 0
    report_dir = Path(plan["report"].output_path("report"))
    with (report_dir / "metrics.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert list(rows[0]) == ["Engine", "Train size", "ROC AUC", "Log loss", "Train time", "Maximum memory", "CPU load"]
    assert {(r["Engine"], int(r["Train size"])) for r in rows} == {
        (e, n) for e in ("xgb_single", "xgb_spark", "lr", "rf") for n in (100, 200, 400)
    }
    for row in rows:
        assert 0.0 <= float(row["ROC AUC"]) <= 1.0 and float(row["Log loss"]) > 0
        assert float(row["Train time"]) > 0 and float(row["Maximum memory"]) > 0
    for png in ("auc.png", "log_loss.png", "train_time.png", "memory.png"):
        assert (report_dir / png).stat().st_size > 1000
    # the logistic regression is fitted with dagspec's defaults, not Spark's (docs/ctr.md)
    from pyspark.ml import PipelineModel

    fitted = PipelineModel.load(str(Path(plan["lr_3"].output_path("model")) / "spark_model")).stages[-1]
    assert fitted.getRegParam() == 1e-4 and fitted.getStandardization() is False
