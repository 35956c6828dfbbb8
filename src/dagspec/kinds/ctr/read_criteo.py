"""Robust reading of raw Criteo click logs: text lines parsed with Spark SQL expressions.

A line becomes a row only when every field is where the schema says it is: the field count must be
exact (40, plus one with ``id_column``; ``pad_short_rows`` restores trailing empty fields that a
writer stripped), the label must be 0 or 1 and every I-column an integer. Anything else goes, with
the raw line and the first reason found, to the quarantine table ``rejected`` inside the stage's
checkpoint. Integers written as floats (``260.0``, as some CSV exports do) are accepted when their
fractional part is zero and counted; ``2.5`` is rejected. A trailing ``\\r`` (CRLF files) is
removed. Nothing is dropped silently: header lines, rejected rows and float-written integers are
all counted in the manifest's metrics.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field

from dagspec import storage
from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, InputRole, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.ctr.columns import CRITEO_CATEGORICAL_COLUMNS, CRITEO_COLUMNS, CRITEO_INTEGER_COLUMNS
from dagspec.kinds.quality.quarantine import keep_rejected

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# An integer, optionally written as a float with a zero fraction; at most 18 digits so the cast to
# a long can never overflow.
_INTEGER = r"^[+-]?[0-9]{1,18}(\.0*)?$"
_FLOAT_WRITTEN = r"\.0*$"
_HEX32 = r"^[0-9a-fA-F]{1,8}$"
# A header line: its label field is a name, not a number.
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


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
    logs = inputs.get("logs")
    if logs is not None and not params.path.startswith("/") and "://" not in params.path:
        path = f"{str(logs).rstrip('/')}/{params.path}"
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
    """Parse raw Criteo lines; bad ones go to the quarantine (``quality.quarantine``); returns ``{"data": df}``."""
    from pyspark.sql import functions as F

    files = list_files(path) if isinstance(path, str) else list(path)
    if not files:
        raise StageFailedError(f"no files match {path!r}")
    delimiter = params.delimiter if params.delimiter is not None else "\t"
    offset = 1 if params.id_column else 0
    expected = len(CRITEO_COLUMNS) + offset

    lines = spark.read.text(files).select(
        # CRLF files: the '\r' would otherwise stick to the last categorical
        F.regexp_replace("value", "\r$", "").alias("line"),
        F.col("_metadata.file_path").alias("file"),
    )
    raw_fields = F.split("line", re.escape(delimiter), -1)
    if params.pad_short_rows:
        # only rows that are short get padded; too-long rows stay wrong and are rejected
        missing = F.greatest(F.lit(0), F.lit(expected) - F.size(raw_fields))
        raw_fields = F.concat(raw_fields, F.array_repeat(F.lit(""), missing))
    with_fields = lines.select(
        "line", "file", raw_fields.alias("f"), F.size(F.split("line", re.escape(delimiter), -1)).alias("n")
    )

    def field(i: int) -> Column:
        return F.trim(F.get(F.col("f"), offset + i))

    label_raw = field(0)
    is_header = (F.col("n") >= offset + 1) & label_raw.rlike(_NAME) if params.header else F.lit(False)
    reasons: list[Column] = [
        F.when(F.size("f") != expected, F.format_string(f"expected {expected} fields, got %d", F.col("n"))),
        F.when(label_raw == "", F.lit("label is missing")),
        F.when(~label_raw.rlike(_INTEGER), F.concat(F.lit("label is not an integer: "), label_raw)),
        F.when(~label_raw.rlike(r"^[+]?0*[01](\.0*)?$"), F.concat(F.lit("label must be 0 or 1, got "), label_raw)),
    ]
    for i, name in enumerate(CRITEO_INTEGER_COLUMNS, start=1):
        value = field(i)
        reasons.append(
            F.when((value != "") & ~value.rlike(_INTEGER), F.concat(F.lit(f"{name} is not an integer: "), value))
        )
    if params.categoricals == "int":
        for i, name in enumerate(CRITEO_CATEGORICAL_COLUMNS, start=1 + len(CRITEO_INTEGER_COLUMNS)):
            value = field(i)
            reasons.append(
                F.when((value != "") & ~value.rlike(_HEX32), F.concat(F.lit(f"{name} is not 32-bit hex: "), value))
            )
    # the first check that fails names the problem; a wrong field count is checked first, so
    # nothing is ever read from a shifted position
    reason = F.when(is_header, F.lit(None)).otherwise(F.coalesce(*reasons))

    def integer(i: int) -> Column:
        value = field(i)
        digits = F.regexp_extract(value, r"^([+-]?[0-9]+)", 1)
        return F.when(value == "", F.lit(None).cast("long")).otherwise(digits.try_cast("long"))

    def categorical(i: int) -> Column:
        value = field(i)
        if params.categoricals == "string":
            return F.when(value == "", F.lit(None).cast("string")).otherwise(value)
        as_long = F.conv(value, 16, 10).try_cast("long")
        # 32-bit two's complement, so ids fit an int column (0xffffffff -> -1)
        signed = F.when(as_long >= 2**31, as_long - 2**32).otherwise(as_long)
        return F.when(value == "", F.lit(None).cast("int")).otherwise(signed.cast("int"))

    float_written = F.lit(False)
    for i in range(len(CRITEO_INTEGER_COLUMNS) + 1):
        float_written = float_written | field(i).rlike(_FLOAT_WRITTEN)

    typed = [integer(0).cast("int").alias("label")]
    typed += [integer(i).alias(name) for i, name in enumerate(CRITEO_INTEGER_COLUMNS, start=1)]
    typed += [
        categorical(i).alias(name)
        for i, name in enumerate(CRITEO_CATEGORICAL_COLUMNS, start=1 + len(CRITEO_INTEGER_COLUMNS))
    ]
    # typed columns are only evaluated for good rows (where fields exist); guard with the reason
    parsed = with_fields.select(
        "line",
        "file",
        is_header.alias("_header"),
        reason.alias("_reason"),
        float_written.alias("_float"),
        F.when(F.size("f") == expected, F.struct(*typed)).alias("_row"),
    )
    parsed = ctx.persist(parsed)

    stats = parsed.agg(
        F.count("*").alias("lines"),
        F.sum(F.col("_header").cast("long")).alias("headers"),
        F.sum(F.col("_reason").isNotNull().cast("long")).alias("rejected"),
        F.sum((F.col("_reason").isNull() & ~F.col("_header") & F.col("_float")).cast("long")).alias("floats"),
    ).first()
    assert stats is not None
    headers, rejected_n = int(stats["headers"] or 0), int(stats["rejected"] or 0)
    if params.header:
        _check_headers(parsed, files, delimiter, offset, headers)
    rows_read = int(stats["lines"]) - headers
    ctx.metrics.update(
        {
            "files": len(files),
            "lines": int(stats["lines"]),
            "header_lines": headers,
            "integers_written_as_floats": int(stats["floats"] or 0),
        }
    )
    rejected = parsed.where(F.col("_reason").isNotNull()).select("line", F.col("_reason").alias("reason"), "file")
    keep_rejected(
        ctx,
        rejected,
        rejected_n=rejected_n,
        rows_read=rows_read,
        max_fraction=params.max_rejected_fraction,
        hint=lambda examples: _hint(examples, params, expected),
    )
    good = parsed.where(F.col("_reason").isNull() & ~F.col("_header")).select("_row.*")
    return {"data": good}


def _check_headers(parsed: DataFrame, files: list[str], delimiter: str, offset: int, headers: int) -> None:
    """Every header line must name the Criteo columns in order (so nothing is read shifted)."""
    if headers > len(files):
        raise StageFailedError(f"found {headers} header lines in {len(files)} files: only the first line may be one")
    expected = (["id"] if offset else []) + [c.lower() for c in CRITEO_COLUMNS]
    for row in parsed.where("_header").select("line", "file").distinct().limit(len(files) + 1).collect():
        names = [n.strip().strip('"').lower() for n in row["line"].split(delimiter)]
        if names != expected:
            raise StageFailedError(
                f"header of {row['file']} does not name the Criteo columns in order: got {names[:6]}... "
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
