"""Raw Criteo lines to typed rows and reasons, as Spark SQL expressions (used by ``read_criteo``).

Spark's CSV parser splits the lines in the JVM (``from_csv`` over the text reader's lines, every
field a string, quotes and escapes off: a ``"`` is an ordinary character and never joins lines);
a wrong field count shows as its corrupt-record column. Every field then takes a fast path (the
label is ``0`` or ``1``, an integer casts to a long) and only the fields that miss it are looked at
with the rules' regular expressions: a float-written integer (``260.0``, accepted and counted),
``2.5`` (rejected), a header's names, a missing label. So a clean line costs a split and a cast
per integer, and the reason of a bad one is exactly the first rule it breaks, in this order: the
field count, the label (missing, not an integer, not 0 or 1), each I-column, each C-column (hex
with ``categoricals: int``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from dagspec.kinds.ctr.columns import CRITEO_CATEGORICAL_COLUMNS, CRITEO_COLUMNS, CRITEO_INTEGER_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# An integer, optionally written as a float with a zero fraction; at most 18 digits so the cast to
# a long can never overflow.
_INTEGER = r"^[+-]?[0-9]{1,18}(\.0*)?$"
_FLOAT_WRITTEN = r"\.0*$"
_LABEL = r"^[+]?0*[01](\.0*)?$"
_HEX32 = r"^[0-9a-fA-F]{1,8}$"
# A header line: its label field is a name, not a number.
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_BAD = "_bad"


class LineOptions(Protocol):
    """What parsing needs of the read options."""

    @property
    def header(self) -> bool | None: ...
    @property
    def id_column(self) -> bool: ...
    @property
    def pad_short_rows(self) -> bool: ...
    @property
    def categoricals(self) -> str: ...


def _options(delimiter: str) -> dict[str, str]:
    """Spark's CSV parser as both passes use it: every field verbatim but for the blanks around it."""
    return {
        "sep": delimiter,
        "mode": "PERMISSIVE",
        "columnNameOfCorruptRecord": _BAD,
        "quote": "",  # off: Criteo fields are never quoted
        "escape": "",
        "nullValue": "",
        "ignoreLeadingWhiteSpace": "true",  # blanks around a field are not part of it
        "ignoreTrailingWhiteSpace": "true",
    }


def _string_ddl(params: LineOptions) -> str:
    expected = len(CRITEO_COLUMNS) + (1 if params.id_column else 0)
    return ", ".join(f"_f{i} STRING" for i in range(expected)) + f", {_BAD} STRING"


def parse_lines(
    spark: SparkSession, files: list[str], params: LineOptions, delimiter: str, *, odd_only: bool = False
) -> DataFrame:
    """Columns ``line``, ``file``, ``_reason`` (null: good), ``_header``, ``_names``, ``_float``, ``_row``.

    ``_names`` (header lines only) are the header's names, trimmed of blanks and quotes,
    lower-cased and joined by the delimiter; ``_float``: an integer field was written as a float;
    ``_row``: the typed Criteo columns (meaningful where ``_reason`` is null). Every line of the
    files is here, empty ones included: this is what the counts and the quarantine are made of.
    ``odd_only``: only the lines that are not a row as read (those ``good_rows`` leaves out), each
    split by the same parser first; the rules run on these alone.
    """
    from pyspark.sql import functions as F

    lines = spark.read.text(files).select(F.col("value").alias("line"), F.col("_metadata.file_path").alias("file"))
    if odd_only:
        typed = lines.select("*", F.from_csv("line", _typed_ddl(params), _options(delimiter)).alias("t"))
        lines = typed.where(~_as_read(lambda n: F.col(f"t.{n}"), params)).drop("t")
    split = lines.select("line", "file", F.from_csv("line", _string_ddl(params), _options(delimiter)).alias("p"))
    rules = _Rules(params, delimiter, F.col("line"))
    return split.select(
        "line",
        "file",
        rules.reason.alias("_reason"),
        rules.is_header.alias("_header"),
        F.when(rules.is_header, rules.names).alias("_names"),
        rules.float_written.alias("_float"),
        F.struct(*rules.row).alias("_row"),
    )


def _typed_ddl(params: LineOptions) -> str:
    """The reader's schema: the label a string, I-columns longs, C-columns strings, the corrupt record."""
    names = (["_id"] if params.id_column else []) + CRITEO_COLUMNS
    return ", ".join(
        [f"{n} BIGINT" if n in CRITEO_INTEGER_COLUMNS else f"{n} STRING" for n in names] + [f"{_BAD} STRING"]
    )


def _as_read(field: Callable[[str], Column], params: LineOptions) -> Column:
    """A line is a good row as read: parsed whole, a label of ``0`` or ``1`` (and hex categoricals where asked)."""
    from pyspark.sql import functions as F

    fast = field(_BAD).isNull() & field("label").isin("0", "1")
    if params.categoricals == "int":
        for name in CRITEO_CATEGORICAL_COLUMNS:
            fast = fast & (field(name).isNull() | field(name).rlike(_HEX32))
    return F.coalesce(fast, F.lit(False))


def good_rows(spark: SparkSession, files: list[str], params: LineOptions, delimiter: str) -> DataFrame:
    """The typed Criteo rows of the lines that are good rows as read, at the cost of Spark's CSV reader.

    Spark's CSV reader types the fields itself (label a string, I-columns longs); a line it parses
    whole with a label of ``0`` or ``1`` (and hex categoricals where asked) is a good row as read.
    The other lines are left out (``parse_lines(odd_only=True)`` finds them): the query is the
    reader's alone (the rules' code in the same generated stage costs the reader a third more
    even when no line runs it).
    """
    from pyspark.sql import functions as F

    read = spark.read.options(**_options(delimiter)).schema(_typed_ddl(params)).csv(files)
    as_read = [F.col("label").cast("int").alias("label"), *(F.col(n) for n in CRITEO_INTEGER_COLUMNS)]
    as_read += [_categorical(F.col(n), params.categoricals).alias(n) for n in CRITEO_CATEGORICAL_COLUMNS]
    return read.where(_as_read(F.col, params)).select(*as_read)


class _Rules:
    """The rules as Spark SQL expressions over the string fields ``p._f<i>`` of ``line``."""

    def __init__(self, params: LineOptions, delimiter: str, line: Column) -> None:
        from pyspark.sql import functions as F

        offset = 1 if params.id_column else 0
        expected = len(CRITEO_COLUMNS) + offset

        def raw(i: int) -> Column:  # null for an empty field (and for fields a short line lacks)
            return F.col(f"p._f{offset + i}")

        # from_csv reads an empty line as a row of nulls: it has one (empty) field
        miscounted = F.col(f"p.{_BAD}").isNotNull() | (line == "")
        fields = F.when(miscounted, F.size(F.split(line, re.escape(delimiter), -1)))
        short_ok = fields < expected if params.pad_short_rows else F.lit(False)
        wrong_count = miscounted & ~short_ok

        label_raw = raw(0)
        label = F.trim(label_raw)
        label_odd = label_raw.isNull() | ~label_raw.isin("0", "1")  # the fast path: "0" or "1"
        self.is_header = (label_odd & label.rlike(_NAME)) if params.header else F.lit(False)
        reasons: list[Column] = [
            F.when(wrong_count, F.format_string(f"expected {expected} fields, got %d", fields)),
            F.when(label_odd & F.coalesce(label == "", F.lit(True)), F.lit("label is missing")),
            F.when(label_odd & ~label.rlike(_INTEGER), F.concat(F.lit("label is not an integer: "), label)),
            F.when(label_odd & ~label.rlike(_LABEL), F.concat(F.lit("label must be 0 or 1, got "), label)),
        ]
        as_long = {name: raw(i).try_cast("long") for i, name in enumerate(CRITEO_INTEGER_COLUMNS, start=1)}
        # a field that is there but does not cast: blank, float-written, or not an integer
        odd = {
            name: raw(i).isNotNull() & as_long[name].isNull() for i, name in enumerate(CRITEO_INTEGER_COLUMNS, start=1)
        }
        for i, name in enumerate(CRITEO_INTEGER_COLUMNS, start=1):
            value = F.trim(raw(i))
            bad = odd[name] & (value != "") & ~value.rlike(_INTEGER)
            reasons.append(F.when(bad, F.concat(F.lit(f"{name} is not an integer: "), value)))
        categorical_start = 1 + len(CRITEO_INTEGER_COLUMNS)
        if params.categoricals == "int":
            for i, name in enumerate(CRITEO_CATEGORICAL_COLUMNS, start=categorical_start):
                value = F.trim(raw(i))
                bad = (value != "") & ~value.rlike(_HEX32)
                reasons.append(F.when(bad, F.concat(F.lit(f"{name} is not 32-bit hex: "), value)))
        # the first check that fails names the problem; a wrong field count is checked first, so
        # nothing is ever read from a shifted position
        self.reason = F.when(self.is_header, F.lit(None)).otherwise(F.coalesce(*reasons))

        float_written = label_odd & label.rlike(_FLOAT_WRITTEN)
        for i, name in enumerate(CRITEO_INTEGER_COLUMNS, start=1):
            float_written = float_written | (odd[name] & F.trim(raw(i)).rlike(_FLOAT_WRITTEN))
        self.float_written = float_written

        def integer(i: int, name: str) -> Column:
            digits = F.regexp_extract(F.trim(raw(i)), r"^([+-]?[0-9]+)", 1)
            return F.when(odd[name], digits.try_cast("long")).otherwise(as_long[name])

        label_value = F.when(label_odd, F.regexp_extract(label, r"^[+]?([0-9]+)", 1).try_cast("int")).otherwise(
            label_raw.cast("int")
        )
        row = [label_value.alias("label")]
        row += [integer(i, name).alias(name) for i, name in enumerate(CRITEO_INTEGER_COLUMNS, start=1)]
        row += [
            _categorical(raw(i), params.categoricals).alias(name)
            for i, name in enumerate(CRITEO_CATEGORICAL_COLUMNS, start=categorical_start)
        ]
        self.row = row
        self.names = F.lower(
            F.array_join(
                F.transform(
                    F.split(line, re.escape(delimiter), -1),
                    lambda n: F.regexp_replace(F.regexp_replace(n, r"^\s+|\s+$", ""), r'^"+|"+$', ""),
                ),
                delimiter,
            )
        )


def _categorical(text: Column, categoricals: str) -> Column:
    """A C-column: the string, or its 32-bit int with ``categoricals: int``.

    The parser has trimmed the blanks around it already (``_options``).
    """
    from pyspark.sql import functions as F

    if categoricals == "string":
        return text
    as_long = F.conv(text, 16, 10).try_cast("long")
    # 32-bit two's complement, so ids fit an int column (0xffffffff -> -1)
    return F.when(as_long >= 2**31, as_long - 2**32).otherwise(as_long).cast("int")
