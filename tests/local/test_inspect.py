"""`dagspec head` and `describe` on checkpoints that real Spark committed, read back with pyarrow."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.local.cli import main
from dagspec.spec.loader import load_spec
from tests.helpers import parquet_table, run_pipeline_in_process, write_spec
from tests.job.test_runtime import SPEC  # raw -> few (sample n) -> out (export)

pytestmark = pytest.mark.spark


@pytest.fixture
def committed(spark, home, tmp_path: Path) -> tuple[Path, dict]:
    """A spec run once at its defaults (n=5), and its plan."""
    path = write_spec(tmp_path / "p", SPEC.format(data=parquet_table(spark, tmp_path, 40)))
    return path, run_pipeline_in_process(spark, load_spec(path))


def test_head_prints_the_schema_and_the_first_rows(committed, capsys) -> None:
    path, plan = committed
    assert main(["head", str(path), "few.data", "-n", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"few.data ({plan['few'].fingerprint}): {plan['few'].output_path('data')}"
    assert lines[1:4] == ["schema:", "  id: int64", "  label: int32"]
    assert lines[4].split() == ["id", "label"]
    assert len(lines[5:8]) == 3 and all(len(line.split()) == 2 for line in lines[5:8])
    assert lines[8] == "(3 of 5 rows)"


def test_head_of_an_export_reads_what_it_published(committed, capsys) -> None:
    path, plan = committed
    assert main(["head", str(path), "out"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"out ({plan['out'].fingerprint}): {plan['out'].publish_path}"
    assert "/storage/exports/m/few" in out and out.rstrip().endswith("(5 of 5 rows)")


def test_describe_prints_rows_columns_nulls_and_metrics(committed, capsys) -> None:
    path, plan = committed
    assert main(["describe", str(path), "few"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"few.data (sample, {plan['few'].fingerprint}): {plan['few'].output_path('data')}"
    assert lines[1].startswith("committed ")
    assert lines[2].startswith("rows: 5 (")
    assert lines[3] == "columns:"
    assert lines[4].split() == ["id", "int64", "nulls:", "0"]
    assert lines[5].split() == ["label", "int32", "nulls:", "0"]
    assert lines[6:] == ["metrics:", '  sizes: {"data": 5}']


def test_a_stage_not_committed_at_these_params_says_so(committed, capsys) -> None:
    path, _ = committed
    assert main(["head", str(path), "few", "-p", "n=7"]) == 1
    assert capsys.readouterr().err.strip() == (
        "error: stage few is not committed at these params (missing: params changed: n 5 -> 7); run the spec first"
    )
    assert main(["describe", str(path), "out", "-p", "n=7"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: stage out is not committed at these params (missing: upstream not committed yet: few")
    assert main(["head", str(path), "few.nope"]) == 1
    assert capsys.readouterr().err.strip() == "error: stage few has no output 'nope' (outputs: data)"
