"""The check kind on real Spark: passing checks pass the table through, failing ones name every violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import StageFailedError
from tests.helpers import load_and_run, manifest, spec_reading

pytestmark = pytest.mark.spark


@pytest.fixture
def events(spark, tmp_path: Path) -> Path:
    """12 events: id, label in {0, 1, 2} but one 7 and one null, hlf (array<double>) in [0, 1] but one 1.5."""
    rows = [(i, i % 3, [0.1 * (i % 10), 0.5], f"e{i}") for i in range(10)]
    rows += [(10, 7, [0.2, 1.5], "e10"), (10, None, [0.0, 0.0], None)]
    path = tmp_path / "events"
    spark.createDataFrame(rows, "id long, label int, hlf array<double>, name string").coalesce(2).write.parquet(
        str(path)
    )
    return path


def _spec(folder: Path, data: Path, check_params: str) -> Path:
    return spec_reading(
        folder,
        data,
        f"""
        checked:
          kind: check
          inputs: {{data: raw}}
          params: {check_params}
        after: {{kind: sql, inputs: {{t: checked}}, params: {{query: "select count(*) as n from t"}}}}
        """,
    )


def test_a_passing_check_passes_the_table_through(spark, home, tmp_path: Path, events: Path) -> None:
    params = """
              rows: {min: 10, max: 100}
              columns:
                id: {not_null: true, min: 0}
                hlf: {not_null: true, min: 0, max: 2}
                label: {max_null_fraction: 0.1, in: [0, 1, 2, 7]}
                name: {unique: true}
              schema: {id: bigint, label: int, hlf: array<double>}"""
    plan = load_and_run(spark, _spec(tmp_path / "p", events, params))
    m = manifest(plan["checked"])
    assert m["rows"] == {"data": 12}
    assert m["metrics"]["expectations"] == 13 and m["metrics"]["violations"] == 0
    by_rule = {(r["column"], r["rule"]): r["observed"] for r in m["metrics"]["results"]}
    assert by_rule[("hlf", "max 2")] == "max 1.5"
    assert by_rule[("label", "max_null_fraction 0.1")] == "0.0833333 (1 of 12 rows null)"
    assert by_rule[("name", "unique")] == "0 duplicate rows (11 distinct of 11 non-null)"
    assert spark.read.parquet(plan["after"].output_path("data")).first()["n"] == 12
    report = Path(m["metrics"]["report"])
    assert report == Path(plan["checked"].checkpoint_dir) / "check.md"
    text = report.read_text()
    assert text.startswith("# check checked: passed") and "| hlf | max 2 | max 1.5 | ok |" in text


def test_a_failing_check_names_every_violation(spark, home, tmp_path: Path, events: Path) -> None:
    params = """
              rows: {min: 100}
              columns:
                id: {unique: true}
                label: {not_null: true, in: [0, 1, 2]}
                hlf: {min: 0, max: 1}
                lable: {not_null: true}
              schema: {label: bigint}"""
    with pytest.raises(StageFailedError) as failed:
        load_and_run(spark, _spec(tmp_path / "p", events, params))
    assert str(failed.value).splitlines() == [
        "check failed: 7 of 8 expectations not met (12 rows):",
        "  rows: min 100: 12 rows",
        "  label: type bigint: is int",
        "  id: unique: 1 duplicate rows (11 distinct of 12 non-null)",
        "  label: not_null: 1 null rows",
        "  label: in [0, 1, 2]: 1 rows outside (e.g. 7)",
        "  hlf: max 1: max 1.5 (1 rows above)",
        "  lable: exists: column missing (columns: id, label, hlf, name)",
    ]
    assert not list((tmp_path / "storage" / "pipe" / "checked").glob("*/_SUCCESS"))
    assert not list((tmp_path / "storage" / "pipe" / "after").glob("*/_SUCCESS"))


def test_severity_warn_records_and_goes_on(spark, home, tmp_path: Path, events: Path) -> None:
    params = "{severity: warn, columns: {label: {in: [0, 1, 2]}, hlf: {max: 1.0}}}"
    plan = load_and_run(spark, _spec(tmp_path / "p", events, params))
    m = manifest(plan["checked"])
    assert m["metrics"]["violations"] == 2 and m["rows"] == {"data": 12}
    text = Path(m["metrics"]["report"]).read_text()
    assert "# check checked: warnings" in text and "| label | in [0, 1, 2] | 1 rows outside (e.g. 7) | warn |" in text


def test_every_expectation_is_computed_by_one_spark_job(spark, tmp_path: Path, events: Path) -> None:
    from dagspec.kinds.base import Inputs, StageContext
    from dagspec.kinds.quality.check import CheckParams, check

    params = CheckParams.model_validate(
        {"rows": {"min": 1}, "columns": {"id": {"unique": True}, "name": {"unique": True}, "hlf": {"max": 1}}}
    )
    ctx = StageContext(spark, "d", "checked", "f", tmp_path, str(tmp_path), str(tmp_path / "_tmp-f-a"), str(tmp_path))
    df = spark.read.parquet(str(events))
    # without adaptive execution a query is one job whatever its shuffles (AQE runs each stage as a job)
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.sparkContext.setJobGroup("one-pass", "check")
    try:
        with pytest.raises(StageFailedError, match=r"2 of 4 expectations not met"):
            check(Inputs({"data": df}), params, ctx)
    finally:
        spark.sparkContext.setJobGroup("other", "")
        spark.conf.unset("spark.sql.adaptive.enabled")
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup("one-pass")) == 1
