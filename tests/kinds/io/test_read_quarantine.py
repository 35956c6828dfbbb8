"""read keeps bad rows aside: csv/json quarantine, Parquet files that disagree, ROOT values that do not fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pyspark.errors import PythonException

from dagspec.errors import StageFailedError
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark


def bad_csv(folder: Path) -> Path:
    """The issue's file: 12 rows, one with 'x7' in an INT column, one with extra fields."""
    rows = ["id,amount,name"]
    for i in range(12):
        if i == 4:
            rows.append("4,x7,four")
        elif i == 8:
            rows.append("8,16,eight,extra,fields")
        else:
            rows.append(f'{i},{2 * i},"name, {i}"')  # quoted delimiters are no extra fields
    path = folder / "bad.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _read_spec(folder: Path, data: Path, extra: str = "") -> Path:
    return write_spec(
        folder / "p",
        f"""
        stages:
          raw:
            kind: read
            params: {{format: csv, path: "{data}", header: true, schema: "id INT, amount INT, name STRING"{extra}}}
        """,
    )


def test_bad_csv_rows_are_quarantined_and_counted(spark, home, tmp_path: Path) -> None:
    data = bad_csv(tmp_path)
    plan = load_and_run(spark, _read_spec(tmp_path, data, ", max_rejected_fraction: 0.2"))
    m = manifest(plan["raw"])
    assert m["rows"] == {"data": 10}
    assert m["metrics"]["rejected"] == 2 and m["metrics"]["rows_read"] == 12
    assert m["metrics"]["rejected_fraction"] == pytest.approx(2 / 12, abs=1e-6)
    committed = plan["raw"].output_path("rejected")
    assert m["metrics"]["rejected_path"] == committed and Path(committed).is_dir()
    rejected = sorted(spark.read.parquet(committed).collect(), key=lambda r: r["line"])
    assert [(r["line"], r["reason"]) for r in rejected] == [
        ("4,x7,four", "amount: cannot parse 'x7' as int"),
        ("8,16,eight,extra,fields", "expected 3 fields, got 5"),
    ]
    assert all(r["file"].endswith("/bad.csv") for r in rejected)
    good = spark.read.parquet(plan["raw"].output_path("data"))
    assert sorted(r["id"] for r in good.collect()) == [0, 1, 2, 3, 5, 6, 7, 9, 10, 11]
    assert good.where("id = 3").first()["name"] == "name, 3"


def test_headers_of_several_files_and_blank_lines_are_no_rejected_rows(spark, home, tmp_path: Path) -> None:
    """The clean check counts a header per file; a blank line is no row and makes the exact count run."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("id,amount,name\n1,2,one\n3,4,three\n")
    (folder / "b.csv").write_text("id,amount,name\n5,6,five\n")
    plan = load_and_run(spark, _read_spec(tmp_path / "clean", folder))
    m = manifest(plan["raw"])
    assert m["rows"] == {"data": 3} and m["metrics"]["rejected"] == 0 and m["metrics"]["rows_read"] == 3
    (folder / "b.csv").write_text("id,amount,name\n5,6,five\n\n7,x,seven\n")  # a blank line, a bad row
    plan = load_and_run(spark, _read_spec(tmp_path / "dirty", folder, ", max_rejected_fraction: 0.5"))
    m = manifest(plan["raw"])
    assert m["rows"] == {"data": 3} and m["metrics"]["rejected"] == 1 and m["metrics"]["rows_read"] == 4
    (folder / "b.csv").write_text("id,amount,name\n5,6,five\n   \n")  # blanks only: no row, none rejected
    plan = load_and_run(spark, _read_spec(tmp_path / "blank", folder))
    m = manifest(plan["raw"])
    assert m["rows"] == {"data": 3} and m["metrics"]["rejected"] == 0 and m["metrics"]["rows_read"] == 3


def test_above_max_rejected_fraction_fails_with_the_count(spark, home, tmp_path: Path) -> None:
    data = bad_csv(tmp_path)
    with pytest.raises(
        StageFailedError,
        match=r"2 of 12 rows rejected \(fraction 0\.1667 > max_rejected_fraction 0\.001\); examples:\n"
        r"  \[amount: cannot parse 'x7' as int\] '4,x7,four'",
    ):
        load_and_run(spark, _read_spec(tmp_path, data))
    assert not list((tmp_path / "storage" / "pipe" / "raw").glob("*/_SUCCESS"))


def test_json_rows_that_do_not_fit_the_schema(spark, home, tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text(
        '{"a": 1, "b": "x"}\n{"a": "x7", "b": "y"}\n{"a": 3, "b": \n{"a": 4, "b": "z"}\n[1, 2]\n'
    )
    spec = write_spec(
        tmp_path / "p",
        f"""
        stages:
          j: {{kind: read, params: {{format: json, path: "{tmp_path}/in.json", schema: "a INT, b STRING", max_rejected_fraction: 0.7}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    m = manifest(plan["j"])
    assert m["rows"] == {"data": 2} and m["metrics"]["rejected"] == 3
    reasons = {r["line"]: r["reason"] for r in spark.read.parquet(m["metrics"]["rejected_path"]).collect()}
    assert reasons['{"a": "x7", "b": "y"}'] == "a: cannot parse 'x7' as int"
    assert reasons['{"a": 3, "b": '] == "not valid JSON"
    assert reasons["[1, 2]"] == "not a JSON object"


def test_parquet_files_that_disagree_on_the_schema_fail_with_their_names(spark, home, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    for name, type_ in (("a", "int"), ("b", "string")):
        written = tmp_path / name
        spark.range(5).selectExpr("id", f"cast(id as {type_}) as n").coalesce(1).write.parquet(str(written))
        next(written.glob("part-*.parquet")).rename(folder / f"{name}.parquet")
    spec = write_spec(
        tmp_path / "p", f'stages:\n  raw: {{kind: read, params: {{format: parquet, path: "{folder}"}}}}\n'
    )
    with pytest.raises(StageFailedError, match=r"Parquet files disagree on the schema") as failed:
        load_and_run(spark, spec)
    message = str(failed.value)
    assert "column 'n' is int in 1 file (" in message and "string in 1 file (" in message
    assert f"{folder}/a.parquet" in message and f"{folder}/b.parquet" in message


def _root_file(path: Path, values: np.ndarray) -> Path:
    import uproot

    with uproot.recreate(path) as handle:
        handle["events"] = {"run": np.arange(len(values), dtype=np.uint32), "event": values}
    return path


def test_root_unsigned_values_are_widened_or_fail_with_the_branch(spark, home, tmp_path: Path) -> None:
    small = _root_file(tmp_path / "small.root", np.array([1, 2**40, 2**63 - 1], dtype=np.uint64))
    spec = write_spec(tmp_path / "p", f'stages:\n  raw: {{kind: read, params: {{format: root, path: "{small}"}}}}\n')
    plan = load_and_run(spark, spec)
    df = spark.read.parquet(plan["raw"].output_path("data"))
    assert {f.name: f.dataType.simpleString() for f in df.schema} == {"run": "bigint", "event": "bigint"}
    assert sorted(r["event"] for r in df.collect()) == [1, 2**40, 2**63 - 1]

    big = _root_file(tmp_path / "big.root", np.array([1, 2**64 - 1], dtype=np.uint64))
    spec = write_spec(
        tmp_path / "q",
        f'stages:\n  raw: {{kind: read, params: {{format: root, path: "{big}", branches: {{event: evt}}}}}}\n',
    )
    with pytest.raises(
        PythonException, match=r"read root: branch 'event' \(column 'evt'\) of .*big\.root holds uint64"
    ):
        load_and_run(spark, spec)
