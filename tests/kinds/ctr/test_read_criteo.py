"""Raw Criteo reading on the real sample and every real variant: read right or rejected clearly."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from dagspec.errors import StageFailedError
from tests.conftest import CRITEO_SAMPLE, SHARED_DATA
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark

VARIANTS = SHARED_DATA / "criteo" / "variants"


def _run(spark, tmp_path: Path, path: Path | str, **options: object):
    opts = ", ".join(f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {str(v).lower()}" for k, v in options.items())
    spec = write_spec(
        tmp_path / "pipelines",
        f"""
        stages:
          raw: {{kind: read, params: {{format: criteo, path: "{path}"{", " + opts if opts else ""}}}}}
        """,
    )
    plan = load_and_run(spark, spec)
    return plan["raw"], manifest(plan["raw"])


def _rows(spark, stage) -> list:
    return spark.read.parquet(stage.output_path("data")).orderBy("I1", "I2", "C1").collect()


def test_real_sample_reads_typed_with_empty_quarantine(spark, home, tmp_path: Path) -> None:
    stage, m = _run(spark, tmp_path, CRITEO_SAMPLE)
    assert m["rows"] == {"data": 1000}
    assert m["metrics"]["rows_rejected"] == 0
    schema = m["outputs"]["data"]["schema"]
    assert schema.startswith("struct<label:int,I1:bigint") and "C26:string" in schema
    first = spark.read.parquet(stage.output_path("data")).where("I2 = 110 AND I1 = 5").first()
    # the first line of the file: 1  5  110  <empty>  16 ...
    assert first["label"] == 1 and first["I3"] is None and first["I4"] == 16 and first["C1"] == "62770d79"
    assert spark.read.parquet(stage.output_path("rejected")).count() == 0


def test_gz_glob_and_int_categoricals(spark, home, tmp_path: Path) -> None:
    days = tmp_path / "logs"
    days.mkdir()
    lines = CRITEO_SAMPLE.read_bytes().splitlines(keepends=True)
    (days / "day_0.tsv").write_bytes(b"".join(lines[:600]))
    with gzip.open(days / "day_1.tsv.gz", "wb") as out:
        out.write(b"".join(lines[600:]))
    stage, m = _run(spark, tmp_path, f"{days}/day_*", categoricals="int")
    assert m["rows"] == {"data": 1000} and m["metrics"]["files"] == 2
    row = spark.read.parquet(stage.output_path("data")).where("I2 = 110 AND I1 = 5").first()
    assert row["C1"] == 0x62770D79
    assert row["C2"] == 0xE21F5D58 - 2**32  # 32-bit two's complement
    assert "C1:int" in m["outputs"]["data"]["schema"]


def test_bad_rows_are_quarantined_counted_and_fail_over_the_fraction(spark, home, tmp_path: Path) -> None:
    lines = CRITEO_SAMPLE.read_text().splitlines()
    bad = [
        "\t".join(lines[0].split("\t")[:39]),  # a field short
        lines[1].replace("\t3\t", "\tthree\t", 1),  # a word where an integer belongs
        "2" + lines[2][1:],  # label out of range
    ]
    data = tmp_path / "bad.tsv"
    data.write_text("\n".join(lines[3:] + bad) + "\n")
    stage, m = _run(spark, tmp_path / "ok", data, max_rejected_fraction=0.01)
    assert m["rows"] == {"data": 997}
    assert m["metrics"]["rejected"] == 3 and m["metrics"]["rows_read"] == 1000
    # the manifest names the committed quarantine, not the attempt's temporary folder
    assert m["metrics"]["rejected_path"] == stage.output_path("rejected") and "_tmp-" not in stage.output_path(
        "rejected"
    )
    rejected = spark.read.parquet(m["metrics"]["rejected_path"]).collect()
    reasons = sorted(r["reason"] for r in rejected)
    assert reasons[0] == "I2 is not an integer: three" or "not an integer: three" in " ".join(reasons)
    assert "expected 40 fields, got 39" in reasons
    assert "label must be 0 or 1, got 2" in reasons
    assert {r["line"] for r in rejected} == set(bad)
    with pytest.raises(
        StageFailedError, match=r"3 of 1000 rows rejected \(fraction 0\.0030 > max_rejected_fraction 0\.001\)"
    ):
        _run(spark, tmp_path / "strict", data)


def test_variant_header_comma_float_integers(spark, home, tmp_path: Path) -> None:
    """deepctr: header row, commas, integers written as 260.0: read correctly with options."""
    path = VARIANTS / "deepctr_criteo_sample.csv"
    stage, m = _run(spark, tmp_path, path, header=True, delimiter=",")
    assert m["rows"] == {"data": 200} and m["metrics"]["header_lines"] == 1
    assert m["metrics"]["rows_rejected"] == 0 and m["metrics"]["integers_written_as_floats"] == 200
    row = spark.read.parquet(stage.output_path("data")).where("I5 = 17668").first()
    assert (row["I1"], row["I2"], row["I3"], row["I12"]) == (None, 3, 260, 0)
    assert row["C1"] == "05db9164" and row["C19"] is None and row["C26"] is None


def test_variant_header_without_the_option_is_rejected_with_a_hint(spark, home, tmp_path: Path) -> None:
    with pytest.raises(StageFailedError, match="set header: true"):
        _run(spark, tmp_path, VARIANTS / "deepctr_criteo_sample.csv", delimiter=",")


def test_variant_wrong_delimiter_is_rejected_with_a_hint(spark, home, tmp_path: Path) -> None:
    with pytest.raises(StageFailedError, match=r"201 of 201 rows rejected(.|\n)*delimiter looks like ','"):
        _run(spark, tmp_path, VARIANTS / "deepctr_criteo_sample.csv", header=True)


def test_variant_id_column_and_crlf(spark, home, tmp_path: Path) -> None:
    """guestwalk: Id column, capitalised header, CRLF line ends."""
    path = VARIANTS / "guestwalk_train.tiny.csv"
    stage, m = _run(spark, tmp_path, path, header=True, delimiter=",", id_column=True)
    assert m["rows"] == {"data": 1999} and m["metrics"]["rows_rejected"] == 0
    row = spark.read.parquet(stage.output_path("data")).where("I5 = 1382 AND I2 = 1").first()
    assert (row["label"], row["I1"], row["I12"], row["I13"]) == (0, 1, None, 2)
    assert row["C26"] == "9727dd16"  # no '\r' stuck to the last field
    assert row["C22"] is None


def test_variant_id_column_without_the_option_is_rejected(spark, home, tmp_path: Path) -> None:
    with pytest.raises(StageFailedError, match="set id_column: true"):
        _run(spark, tmp_path, VARIANTS / "guestwalk_train.tiny.csv", header=True, delimiter=",")


def test_variant_stripped_trailing_fields_pad_or_reject(spark, home, tmp_path: Path) -> None:
    """pytorchfm: trailing empty fields stripped (37/38 fields): padded on request, else rejected."""
    path = VARIANTS / "pytorchfm_train_trimmed.txt"
    with pytest.raises(StageFailedError, match=r"(?s)expected 40 fields, got 3[78].*pad_short_rows: true"):
        _run(spark, tmp_path / "strict", path)
    stage, m = _run(spark, tmp_path / "padded", path, pad_short_rows=True)
    assert m["rows"] == {"data": 1000} and m["metrics"]["rows_rejected"] == 0
    df = spark.read.parquet(stage.output_path("data"))
    assert df.where("C25 IS NULL AND C26 IS NULL").count() >= 29
    row = df.where("I5 = 1382 AND I2 = 1").first()
    assert row["C26"] == "9727dd16" and row["I12"] is None


def test_generic_read_needs_existing_files(spark, home, tmp_path: Path) -> None:
    with pytest.raises(StageFailedError, match="no files match"):
        _run(spark, tmp_path, tmp_path / "nothing_*.tsv")


def test_copy_of_sample_with_crlf_reads_the_same(spark, home, tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.tsv"
    crlf.write_bytes(CRITEO_SAMPLE.read_bytes().replace(b"\n", b"\r\n"))
    _, m = _run(spark, tmp_path, crlf)
    assert m["rows"] == {"data": 1000} and m["metrics"]["rows_rejected"] == 0
    shutil.rmtree(tmp_path / "storage", ignore_errors=True)


def test_every_rule_on_odd_lines_each_counted_with_its_reason(spark, home, tmp_path: Path) -> None:
    """The fast path (a cast per field) leaves each rule intact: odd but valid values read right, bad ones rejected."""
    base = CRITEO_SAMPLE.read_text().splitlines()[0].split("\t")  # 1  5  110  <empty>  16 ...

    def line(**fields: str) -> str:
        values = list(base)
        for name, value in fields.items():
            values[["label", *[f"I{i}" for i in range(1, 14)], *[f"C{i}" for i in range(1, 27)]].index(name)] = value
        return "\t".join(values)

    good = [
        line(label="+1", I1="7.00", C1=" abc "),  # float-written, blanks around a categorical
        line(label="1.0", I2=" 12 "),  # float-written label, blanks around an integer
        line(C2='say "hi'),  # a lone quote is an ordinary character: no lines joined
        line(I3="-3"),
        line(I4="40", C3="   "),  # a categorical of blanks is missing
    ]
    bad = {
        line(I1="2.5"): "I1 is not an integer: 2.5",
        line(I4="1e3"): "I4 is not an integer: 1e3",
        line(label="-0"): "label must be 0 or 1, got -0",
        line(label=""): "label is missing",
        line(label="x"): "label is not an integer: x",
        "": "expected 40 fields, got 1",
        "\t" * 39: "label is missing",
    }
    data = tmp_path / "odd.tsv"
    data.write_text("\n".join([*good, *bad]) + "\n")
    stage, m = _run(spark, tmp_path, data, max_rejected_fraction=1)
    assert m["rows"] == {"data": len(good)} and m["metrics"]["lines"] == len(good) + len(bad)
    assert m["metrics"]["rejected"] == len(bad) and m["metrics"]["integers_written_as_floats"] == 2
    rejected = {r["line"]: r["reason"] for r in spark.read.parquet(m["metrics"]["rejected_path"]).collect()}
    assert rejected == bad
    rows = spark.read.parquet(stage.output_path("data")).collect()
    (minus3,) = [r for r in rows if r["I3"] == -3]
    assert minus3["C2"] == "e21f5d58" and minus3["I1"] == 5
    (quoted,) = [r for r in rows if r["C2"] == 'say "hi']
    assert quoted["C3"] == base[16]
    (seven,) = [r for r in rows if r["I1"] == 7]
    assert seven["label"] == 1 and seven["C1"] == "abc"
    (twelve,) = [r for r in rows if r["I2"] == 12]
    assert twelve["label"] == 1
    (blank,) = [r for r in rows if r["I4"] == 40]
    assert blank["C3"] is None and blank["C4"] == base[17]


def test_float_written_integers_without_a_header_are_counted(spark, home, tmp_path: Path) -> None:
    """Float-written integers are not rows as read: their lines get the rules, their rows are added, the floats counted."""
    lines = CRITEO_SAMPLE.read_text().splitlines()
    for i in (3, 10, 500):
        fields = lines[i].split("\t")
        assert fields[2], "I2 of a chosen line is there"
        fields[2] = f"{fields[2]}.0"
        lines[i] = "\t".join(fields)
    (tmp_path / "day.tsv").write_text("\n".join(lines) + "\n")
    stage, m = _run(spark, tmp_path, tmp_path / "day.tsv")
    assert m["rows"] == {"data": 1000} and m["metrics"]["rows_rejected"] == 0
    assert m["metrics"]["integers_written_as_floats"] == 3 and m["metrics"]["header_lines"] == 0
    original, _ = _run(spark, tmp_path / "original", CRITEO_SAMPLE)
    assert _rows(spark, stage) == _rows(spark, original)


def test_counts_that_do_not_add_up_fail_the_stage(spark, tmp_path: Path) -> None:
    """Lines, rows written and rejected lines must add up (a file that changed while read does not)."""
    from dagspec.kinds.ctr.criteo_lines import parse_lines
    from dagspec.kinds.ctr.read_criteo import ReadCriteoParams, _line_stats

    odd = parse_lines(spark, [str(CRITEO_SAMPLE)], ReadCriteoParams(), "\t", odd_only=True)
    stats = _line_stats(odd, 1000, 1000)
    assert (stats["lines"], stats["headers"], stats["rejected"], stats["floats"], stats["good"]) == (1000, 0, 0, 0, 0)
    with pytest.raises(StageFailedError, match="changed while they were read: 1000 lines, but 999 rows read as"):
        _line_stats(odd, 1000, 999)
