"""Robust reading of raw Criteo click logs, at the speed of Spark's own CSV reader.

A line becomes a row only when every field is where the schema says it is: the field count must be
exact (40, plus one with ``id_column``; ``pad_short_rows`` restores trailing empty fields that a
writer stripped), the label must be 0 or 1 and every I-column an integer. Anything else goes, with
the raw line and the first reason found, to the quarantine table ``rejected`` inside the stage's
checkpoint. Integers written as floats (``260.0``, as some CSV exports do) are accepted when their
fractional part is zero and counted; ``2.5`` is rejected. CRLF line ends are read as line ends.
Nothing is dropped silently: header lines, rejected rows and float-written integers are all
counted in the manifest's metrics. How a line is split and checked: ``ctr.criteo_lines``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field

from dagspec import footers, storage
from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, InputRole, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.ctr.columns import CRITEO_COLUMNS
from dagspec.kinds.ctr.criteo_lines import good_rows, parse_lines
from dagspec.kinds.quality.quarantine import keep_rejected, no_rejected

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class CriteoOptions(Protocol):
    """The read options ``read`` (format criteo) and ``read_criteo`` share."""

    @property
    def header(self) -> bool | None: ...
    @property
    def delimiter(self) -> str | None: ...
    @property
    def id_column(self) -> bool: ...
    @property
    def pad_short_rows(self) -> bool: ...
    @property
    def max_rejected_fraction(self) -> float: ...
    @property
    def categoricals(self) -> str: ...


class ReadCriteoParams(StageParams):
    """Raw Criteo logs read robustly (the same options as ``read`` with ``format: criteo``).

    ``path`` is a file, directory or glob; relative paths are relative to the ``logs`` input
    directory when that input is wired, else to the project directory. ``days`` selects among the
    matched files in sorted order: the benchmark trains on all days but the last and tests on the last.
    """

    path: str = Field(default="*", min_length=1)
    days: Literal["all", "all_but_last", "last"] = "all"
    header: bool | None = None
    delimiter: str | None = Field(default=None, min_length=1, max_length=2)
    id_column: bool = False
    pad_short_rows: bool = False
    max_rejected_fraction: float = Field(default=0.001, ge=0, le=1)
    categoricals: Literal["string", "int"] = "string"


def list_files(path: str) -> list[str]:
    """Data files matching a file, directory or glob (local or any URI), sorted by path.

    Hidden and marker files (``_SUCCESS``, ``.crc``) are skipped, as Spark's readers do.
    """
    return [info.path for info in storage.list_files(path)]


def _source_paths(params: ReadCriteoParams, wired: frozenset[str]) -> list[str]:
    """Files read from outside the ``logs`` input are keyed on their identity (the logs on their fingerprint)."""
    inside_logs = "logs" in wired and not params.path.startswith("/") and "://" not in params.path
    return [] if inside_logs else [params.path]


@kind(
    "read_criteo",
    params=ReadCriteoParams,
    inputs={"logs": InputRole(type=FILES, required=False)},
    source_paths=_source_paths,
)
def read_criteo_stage(inputs: Inputs, params: ReadCriteoParams, ctx: StageContext) -> Outputs:
    """Read raw Criteo logs (a path or the logs of generate_criteo_logs); bad rows quarantined.

    Picks the day files (all, all but the last, the last) and reads them with ``read_criteo``.
    """
    logs = inputs.optional_files("logs")
    if logs is not None and not params.path.startswith("/") and "://" not in params.path:
        path = f"{logs.rstrip('/')}/{params.path}"
    else:
        path = ctx.resolve(params.path)
    files = list(ctx.source_files) or list_files(path)
    if not files:
        raise StageFailedError(f"no files match {path!r}")
    if params.days == "all_but_last":
        if len(files) < 2:
            raise StageFailedError(f"days: all_but_last needs at least 2 day files, {path!r} matches {files}")
        files = files[:-1]
    elif params.days == "last":
        files = files[-1:]
    return read_criteo(ctx.spark, files, params, ctx)


def read_criteo(
    spark: SparkSession, path: str | list[str], params: CriteoOptions, ctx: StageContext
) -> dict[str, DataFrame]:
    """Parse raw Criteo lines and write ``data`` (returns ``{}``); bad ones go to the quarantine.

    The rows are written in one pass that computes nothing else: Spark's CSV reader, keeping the
    lines it parses whole with a label of 0 or 1 (``good_rows``; an observation in that pass would
    cost as much as the parse: it breaks Spark's code generation). Then one plain scan counts the
    lines: when every line became a row (the Parquet footers' count), there was no header, no
    rejected line and no float-written integer (those are never rows as read). Otherwise one more
    pass picks the other lines alone and gives them the rules (kept on local disk while the stage
    runs): their good rows are added to ``data``, the rejected ones written to the quarantine, and
    all of them counted; counts that do not add up (a file changed while it was read) fail the
    stage. Nothing of the rows passes through this process.
    """
    from pyspark.sql import functions as F

    files = list_files(path) if isinstance(path, str) else list(path)
    if not files:
        raise StageFailedError(f"no files match {path!r}")
    delimiter = params.delimiter if params.delimiter is not None else "\t"
    data = ctx.output_path("data")
    good_rows(spark, files, params, delimiter).write.mode("error").parquet(data)
    written = footers.count_rows(spark, data)
    lines = spark.read.text(files).count()
    stats: dict[str, Any] = {"lines": lines, "headers": 0, "rejected": 0, "floats": 0}
    rejected = no_rejected(ctx)
    if lines != written:  # some lines are not rows as read: those alone, with the rules
        odd = ctx.persist(parse_lines(spark, files, params, delimiter, odd_only=True))
        stats = _line_stats(odd, lines, written)
        if stats["good"]:
            odd.where(_GOOD).select("_row.*").write.mode("append").parquet(data)
        rejected = odd.where(F.col("_reason").isNotNull()).select("line", F.col("_reason").alias("reason"), "file")
    headers, rejected_n = int(stats["headers"]), int(stats["rejected"])
    if params.header and headers:
        _check_headers(stats, files, delimiter, 1 if params.id_column else 0, headers)
    ctx.metrics.update(
        {
            "files": len(files),
            "lines": int(stats["lines"]),
            "header_lines": headers,
            "integers_written_as_floats": int(stats["floats"]),
        }
    )
    keep_rejected(
        ctx,
        rejected,
        rejected_n=rejected_n,
        rows_read=int(stats["lines"]) - headers,
        max_fraction=params.max_rejected_fraction,
        hint=lambda examples: _hint(examples, params, len(CRITEO_COLUMNS) + (1 if params.id_column else 0)),
    )
    return {}


_GOOD = "_reason IS NULL AND NOT _header"


def _line_stats(odd: DataFrame, lines: int, written: int) -> dict[str, Any]:
    """``lines``, ``headers``, ``rejected``, ``floats``, ``good`` and the header lines' names and files.

    ``odd``: the lines that were not rows as read (``parse_lines(odd_only=True)``), ``written``
    the rows that were; together they must be every line.
    """
    from pyspark.sql import functions as F

    header = F.when(F.col("_header"), F.col("_names"))
    good = F.expr(_GOOD)
    row = odd.agg(
        F.count(header).alias("headers"),
        F.count("_reason").alias("rejected"),
        F.count(F.when(good, 1)).alias("good"),
        F.count(F.when(good & F.col("_float"), 1)).alias("floats"),
        F.min(header).alias("first_names"),
        F.max(header).alias("last_names"),
        F.min_by("file", header).alias("first_file"),
        F.max_by("file", header).alias("last_file"),
    ).first()
    assert row is not None
    stats: dict[str, Any] = {"lines": lines, **row.asDict()}
    if written + int(stats["good"]) + int(stats["headers"]) + int(stats["rejected"]) != lines:
        raise StageFailedError(
            f"the files changed while they were read: {lines} lines, but {written} rows read as they were, "
            f"{stats['good']} rows after the rules, {stats['headers']} header lines and {stats['rejected']} rejected lines"
        )
    return stats


def _check_headers(stats: dict[str, Any], files: list[str], delimiter: str, offset: int, headers: int) -> None:
    """Every header line must name the Criteo columns in order (so nothing is read shifted).

    The header lines' normalised names were observed as their least and greatest value: both equal
    to the expected names means every header line is.
    """
    if headers > len(files):
        raise StageFailedError(f"found {headers} header lines in {len(files)} files: only the first line may be one")
    expected = (["id"] if offset else []) + [c.lower() for c in CRITEO_COLUMNS]
    for key in ("first", "last"):
        names = str(stats[f"{key}_names"]).split(delimiter)
        if names != expected:
            raise StageFailedError(
                f"header of {stats[f'{key}_file']} does not name the Criteo columns in order: got {names[:6]}... "
                f"({len(names)} names), expected {expected[:6]}... ({len(expected)} names)"
                + ("; set id_column: true if the first column is an Id" if names[1:] == expected else "")
                + ("; set id_column: false" if offset and names == expected[1:] else "")
            )


def _hint(examples: Sequence[Any], params: CriteoOptions, expected: int) -> str:
    """A likely option to fix the most common causes of wholesale rejection."""
    reasons = " ".join(str(r["reason"]) for r in examples)
    lines = [str(r["line"]) for r in examples]
    if any(re.match(r"^\s*(id[,\t;])?\s*\"?label", line, re.IGNORECASE) for line in lines) and not params.header:
        return "\nhint: the file starts with a header row; set header: true"
    if "got 1" in reasons:
        seps = {sep: lines[0].count(sep) for sep in (",", ";", "\t", "|")}
        best = max(seps, key=lambda s: seps[s])
        if seps[best]:
            return f"\nhint: lines split into 1 field; the delimiter looks like {best!r}"
    if f"got {expected + 1}" in reasons and not params.id_column:
        return "\nhint: one field too many; set id_column: true if the first column is an Id"
    if f"got {expected - 1}" in reasons and params.id_column:
        return "\nhint: one field too few; is there really an Id column?"
    if "fields, got" in reasons and not params.pad_short_rows:
        return "\nhint: if trailing empty fields were stripped by the writer, set pad_short_rows: true"
    return ""
