"""Partitions in a spec: keys from file names, natural order, windows, scopes, and the errors a
wrong spec gets (file:line, the field, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError
from dagspec.spec.loader import load_spec
from dagspec.spec.partitions import PartitionWindow, in_scope, key_of, order_keys, parse_scope
from tests.helpers import write_spec

HEAD = "dag_id: p\n"
PARTS = "partitions: {files: 'in/day_{day}.tsv'}\n"
RAW = "  raw: {kind: read, partitioned: true, params: {format: tsv, path: '{{ partition.path }}'}}\n"


def test_keys_come_from_the_captured_part_or_the_name() -> None:
    assert key_of("/d/day_{day}.tsv", "/d/day_07.tsv") == "07"
    assert key_of("/d/{day}/part.tsv", "/d/2026-01-02/part.tsv") == "2026-01-02"
    assert key_of("/d/day_{day}.tsv", "/d/other.tsv") is None
    assert key_of("/d/*.tsv.gz", "/d/day_3.tsv.gz") == "day_3"


def test_keys_are_ordered_naturally_and_windows_count_in_that_order() -> None:
    keys = ["day_10", "day_2", "day_1", "day_11"]
    assert order_keys(keys) == ["day_1", "day_2", "day_10", "day_11"]
    assert PartitionWindow(stage="h", last=2).select(keys) == ["day_10", "day_11"]
    assert PartitionWindow(stage="h", skip_last=1).select(keys) == ["day_1", "day_2", "day_10"]
    assert PartitionWindow(stage="h", last=2, skip_last=1).select(keys) == ["day_2", "day_10"]
    assert PartitionWindow.model_validate({"stage": "h", "from": "day_2", "to": "day_10"}).select(keys) == [
        "day_2",
        "day_10",
    ]
    assert PartitionWindow(stage="h", last=2).select(keys, run_key="day_2") == ["day_1", "day_2"]


def test_a_scope_is_a_key_or_a_range() -> None:
    assert parse_scope(None) is None and parse_scope(" ") is None
    assert parse_scope("day_3") == ("day_3", "day_3")
    assert parse_scope("day_3..") == ("day_3", None) and parse_scope("..day_3") == (None, "day_3")
    assert [k for k in ("day_2", "day_3", "day_10") if in_scope(k, parse_scope("day_3..day_10"))] == [
        "day_3",
        "day_10",
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "stages:\n  raw: {kind: read, partitioned: true, params: {format: tsv, path: x}}\n",
            "3:34: stages.raw.partitioned: a partitioned stage needs the spec's `partitions:`",
        ),
        (
            PARTS
            + "stages:\n"
            + RAW
            + "  s: {kind: sql, inputs: {t: {stage: raw, last: 2}, u: u}, params: {query: 'SELECT 1'}}\n"
            "  u: {kind: read, params: {format: tsv, path: x}}\n",
            "5:31: stages.s.inputs.t:",  # fine: a window of raw ...
        ),
        (
            PARTS + "stages:\n" + RAW + "  u: {kind: read, params: {format: tsv, path: x}}\n"
            "  s: {kind: sql, inputs: {t: {stage: u, last: 2}}, params: {query: 'SELECT 1'}}\n",
            "6:30: stages.s.inputs.t: a window reads the partitions of a partitioned stage; 'u' is not partitioned",
        ),
        (
            PARTS + "stages:\n" + RAW + "  s: {kind: sql, partitioned: true, inputs: {t: {stage: raw, last: 2}}, "
            "params: {query: 'SELECT 1'}}\n",
            "5:49: stages.s.inputs.t: a partitioned stage reads its own partition of 'raw': give 'raw', not a window",
        ),
        (
            "partitions: {files: 'a', values: [1]}\nstages:\n  u: {kind: read, params: {format: tsv, path: x}}\n",
            "2:13: partitions: give either `files` (a glob, one partition per file) or `values`",
        ),
        (
            "partitions: {values: ['a/b']}\nstages:\n  u: {kind: read, params: {format: tsv, path: x}}\n",
            "partition key 'a/b' must match",
        ),
        (
            PARTS + "params: {partitions: {type: string, default: x}}\nstages:\n" + RAW,
            "stages is fine; 3:10: params.partitions: param 'partitions' is dagspec's in a partitioned spec",
        ),
    ],
)
def test_a_wrong_partitioned_spec_says_where(tmp_path: Path, text: str, error: str) -> None:
    path = write_spec(tmp_path, HEAD + text)
    if error.startswith("5:31"):  # the valid one
        load_spec(path)
        return
    with pytest.raises(SpecValidationError) as raised:
        load_spec(path)
    wanted = error.split("stages is fine; ")[-1]
    assert wanted in str(raised.value), str(raised.value)
    assert "Traceback" not in str(raised.value)


def test_a_partitioned_stage_cannot_be_a_matrix(tmp_path: Path) -> None:
    text = (
        HEAD
        + PARTS
        + "stages:\n"
        + RAW
        + "  m: {kind: sample, partitioned: true, matrix: {n: [1, 2]}, inputs: {data: raw}, "
        "params: {n: '{{ matrix.n }}'}}\n"
    )
    with pytest.raises(SpecValidationError, match="a matrix stage cannot be partitioned"):
        load_spec(write_spec(tmp_path, text))


def test_a_spec_without_partitions_keeps_its_own_param_named_partitions(tmp_path: Path) -> None:
    from dagspec.plan.partitions import run_scope
    from dagspec.plan.resolve import default_context

    spec = load_spec(
        write_spec(
            tmp_path,
            HEAD + "params: {partitions: {type: integer, default: 1}}\nstages:\n"
            "  u: {kind: read, params: {format: tsv, path: x}}\n",
        )
    )
    assert not run_scope(spec, default_context(spec)).limited  # Spark partitions of its own, no backfill
