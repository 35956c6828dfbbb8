"""Generated logs -> read_criteo -> ctr_features (hashed, as_is) -> LibSVM / VW exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark


def test_generated_logs_features_and_exports(spark, home, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    spec = write_spec(
        tmp_path / "pipelines",
        """
        stages:
          logs: {kind: generate_criteo_logs, params: {rows: 4000, days: 2, seed: 3, base_ctr: 0.2}}
          raw: {kind: read_criteo, inputs: {logs: logs}, params: {path: "day_*.tsv"}}
          hashed: {kind: ctr_features, inputs: {data: raw}, params: {mode: hashed, hash_bits: 10}}
          as_is: {kind: ctr_features, inputs: {data: raw}, params: {mode: as_is}}
          libsvm: {kind: export, inputs: {data: hashed}, params: {format: libsvm, path: out/libsvm}}
          vw: {kind: export, inputs: {data: raw}, params: {format: vw, path: out/vw}}
        """,
    )
    plan = load_and_run(spark, spec)
    logs = Path(plan["logs"].output_path("logs"))
    assert sorted(p.name for p in logs.iterdir() if not p.name.startswith(".")) == ["day_00.tsv", "day_01.tsv"]
    lines = (logs / "day_00.tsv").read_text().splitlines()
    assert len(lines) == 2000 and all(line.count("\t") == 39 for line in lines)
    assert abs(manifest(plan["logs"])["metrics"]["click_rate"] - 0.2) < 0.04

    read = manifest(plan["raw"])
    assert read["rows"] == {"data": 4000} and read["metrics"]["rows_rejected"] == 0
    raw = spark.read.parquet(plan["raw"].output_path("data"))
    ints = raw.select(*[F.avg(F.col(f"I{j}").isNull().cast("double")) for j in range(1, 14)]).first()
    cats = raw.select(*[F.avg(F.col(f"C{j}").isNull().cast("double")) for j in range(1, 27)]).first()
    assert 0.14 < sum(ints) / 13 < 0.24 and 0.05 < sum(cats) / 26 < 0.11
    assert raw.where("C2 RLIKE '^[0-9a-f]{8}$'").count() == 4000  # C2 is never missing
    assert raw.agg(F.countDistinct("C3")).first()[0] > 1000  # a high-cardinality column (1 TiB: 17,295 values)
    assert raw.agg(F.countDistinct("C6")).first()[0] <= 3  # a low one (3 values)

    hashed = spark.read.parquet(plan["hashed"].output_path("data"))
    assert hashed.columns == ["label", "features"]
    first = hashed.first()
    assert first["features"].size == 1024 and 20 <= first["features"].numNonzeros() <= 39

    as_is = spark.read.parquet(plan["as_is"].output_path("data"))
    assert dict(as_is.dtypes)["C1"] == "int" and dict(as_is.dtypes)["I1"] == "bigint"
    assert as_is.where("I1 IS NULL").count() == raw.where("I1 IS NULL").count()  # missing stays missing

    exports = tmp_path / "storage" / "exports" / "out"  # export publishes under <storage.root>/exports/
    libsvm = [line for f in sorted((exports / "libsvm").glob("part-*")) for line in f.read_text().splitlines()]
    assert len(libsvm) == 4000
    label, *pairs = libsvm[0].split(" ")
    indices = [int(p.split(":")[0]) for p in pairs]
    assert float(label) in (0.0, 1.0) and indices == sorted(indices) and min(indices) >= 1 and max(indices) <= 1024
    vw = [line for f in sorted((exports / "vw").glob("part-*")) for line in f.read_text().splitlines()]
    assert len(vw) == 4000 and all(line.startswith(("1 |i ", "-1 |i ")) and " |c " in line for line in vw)
    assert sum(line.startswith("1 ") for line in vw) == raw.where("label = 1").count()


def test_as_is_reads_one_to_eight_hex_digits_and_nothing_else(spark) -> None:
    from dagspec.kinds.ctr.columns import CRITEO_CATEGORICAL_COLUMNS, CRITEO_INTEGER_COLUMNS
    from dagspec.kinds.ctr.features import CtrFeaturesParams, as_is_features

    values = ["ffffffff", "80000000", " 0a ", "7FFFFFFF", "zz", "", "123456789", "12g", None, "é1", "+1"]
    expected = [-1, -(2**31), 10, 2**31 - 1, None, None, None, None, None, None, None]
    rows = [(i, 0, *([None] * 13), value, *([None] * 25)) for i, value in enumerate(values)]
    names = ["_i", "label", *CRITEO_INTEGER_COLUMNS, *CRITEO_CATEGORICAL_COLUMNS]
    types = ["int", "int", *(["bigint"] * 13), *(["string"] * 26)]
    df = spark.createDataFrame(rows, ", ".join(f"{n} {t}" for n, t in zip(names, types, strict=True)))
    out = as_is_features(df, CtrFeaturesParams(mode="as_is", keep_cols=["_i"])).orderBy("_i")
    assert [r["C1"] for r in out.collect()] == expected
