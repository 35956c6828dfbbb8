"""Kind ``read``: Parquet, CSV, TSV, JSON, Criteo logs or ROOT files into a table.

The files are listed when the stage is planned (their sizes and modification times are part of
the cache key) and exactly those files are read. Nothing is read wrong silently:

- csv, tsv and json rows that do not parse under the schema (a wrong number of fields, a value
  that is not of its column's type, malformed JSON) are rejected by Spark's own parser (PERMISSIVE
  mode with a corrupt-record column, so quoting and every reader option keep their meaning) and
  kept aside with the reason in the checkpoint's quarantine (``quality.quarantine``); above
  ``max_rejected_fraction`` the stage fails. With an inferred schema every value fits it, so only
  the field count (csv) and the JSON syntax can reject a row: give a schema to check the values.
- Parquet files that disagree on the schema fail the stage, naming the files.
- criteo and root: see ``ctr.read_criteo`` and ``physics.root``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from dagspec import footers, storage
from dagspec.errors import StageFailedError
from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.quality.quarantine import keep_rejected, no_rejected

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

_BAD = "__dagspec_bad_record"
_FILE = "__dagspec_file"
# reader options that would undo the quarantine (max_rejected_fraction: 0 is FAILFAST)
_OWN_OPTIONS = ("mode", "columnNameOfCorruptRecord")


class ReadParams(StageParams):
    """Read files into a table. Relative paths are relative to the project directory."""

    format: Literal["parquet", "csv", "tsv", "json", "criteo", "root"]
    path: str = Field(min_length=1, description="file, directory or glob; local path or Hadoop URI")
    header: bool | None = Field(default=None, description="first line is a header (csv/tsv/criteo)")
    delimiter: str | None = Field(default=None, min_length=1, max_length=2)
    schema_: str | None = Field(
        default=None, alias="schema", description="a named schema (criteo) or a Spark DDL string"
    )
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    max_rejected_fraction: float = Field(
        default=0.001, ge=0, le=1, description="csv/tsv/json/criteo: fail above this fraction of rejected rows"
    )
    # criteo
    id_column: bool = Field(default=False, description="criteo: the first column is an Id to drop")
    pad_short_rows: bool = Field(default=False, description="criteo: rows with trailing fields stripped")
    categoricals: Literal["string", "int"] = "string"
    # root
    tree: str | None = Field(default=None, description="root: TTree or RNTuple name (default: the only one)")
    branches: list[str] | dict[str, str] | None = Field(default=None, description="root: selection/renaming")
    entries_per_task: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _schema_only_where_it_applies(self) -> ReadParams:
        if self.schema_ == "criteo" and self.format not in ("csv", "tsv", "criteo"):
            raise ValueError("schema 'criteo' applies to csv, tsv or criteo files")
        own = [k for k in self.options if k in _OWN_OPTIONS]
        if own and self.format in ("csv", "tsv", "json"):
            raise ValueError(
                f"options {own} are set by read itself: rows that do not parse are kept in the quarantine; "
                "use max_rejected_fraction (0: fail on the first bad row)"
            )
        return self


@kind("read", params=ReadParams, inputs={}, source_paths=lambda params, wired: [params.path])
def read(inputs: Inputs, params: ReadParams, ctx: StageContext) -> Outputs:
    """Read Parquet, CSV, TSV, JSON, Criteo logs or ROOT files into a table; bad rows quarantined."""
    path = ctx.resolve(params.path)
    files = ctx.source_files
    if not files:
        raise StageFailedError(f"no files match {path!r}")
    if params.format == "criteo":
        from dagspec.kinds.ctr.read_criteo import read_criteo

        return read_criteo(ctx.spark, files, params, ctx)
    if params.format == "root":
        from dagspec.kinds.physics.root import read_root

        return {"data": read_root(ctx.spark, path, params, ctx)}
    if params.format == "parquet":
        return {"data": read_table(ctx, path, params)}
    return read_text_table(ctx, files, params)


def read_table(ctx: StageContext, path: str, params: ReadParams) -> DataFrame:
    """Parquet through Spark's reader, after checking that every file has the same schema."""
    from dagspec.kinds.ctr.columns import named_schema

    options = {k: str(v) for k, v in params.options.items()}
    merge = options.get("mergeSchema", "").lower() == "true"
    check_parquet_schemas(ctx, list(ctx.source_files), only_conflicts=merge or params.schema_ is not None)
    reader = ctx.spark.read.options(**options)
    if params.schema_:
        reader = reader.schema(named_schema(params.schema_) or params.schema_)
    return reader.parquet(path)


def _reader_options(params: ReadParams) -> dict[str, str]:
    options = {k: str(v) for k, v in params.options.items()}
    if params.format in ("csv", "tsv"):
        options["sep"] = params.delimiter or ("\t" if params.format == "tsv" else ",")
        options["header"] = str(bool(params.header)).lower()
    return options


# reader options under which a line of the file is not one record (or not read as the text reader reads it)
_NOT_LINE_BY_LINE = ("multiline", "linesep", "encoding", "charset", "samplingratio")


def read_text_table(ctx: StageContext, files: list[str], params: ReadParams) -> Outputs:
    """csv / tsv / json through Spark's readers; rows that do not parse go to the quarantine.

    csv and tsv read line by line write the rows that parse in one pass that computes nothing
    else; one text scan then counts the non-empty lines: when they are the rows written (and a
    header line per file), nothing was rejected. Otherwise (and always for json, multi-line
    records or another line separator or encoding) the rejected rows are parsed again, counted
    and written to the quarantine; the rows written stand (every row that parses is good).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import DataType, StringType, StructField, StructType

    from dagspec.kinds.ctr.columns import named_schema

    spark = ctx.spark
    options = _reader_options(params)
    load = spark.read.csv if params.format != "json" else spark.read.json
    if params.schema_:
        schema = DataType.fromDDL(named_schema(params.schema_) or params.schema_)
        if not isinstance(schema, StructType):
            raise StageFailedError(f"schema {params.schema_!r} is not a list of columns")
    else:  # inferred (one pass, as Spark's inferSchema does); Spark's own corrupt column left out
        inferred = load(files, **options, **({"inferSchema": "true"} if params.format != "json" else {})).schema
        corrupt = spark.conf.get("spark.sql.columnNameOfCorruptRecord")
        schema = StructType([f for f in inferred.fields if f.name != corrupt])
    full = StructType([*schema.fields, StructField(_BAD, StringType())])
    raw = load(files, schema=full, mode="PERMISSIVE", columnNameOfCorruptRecord=_BAD, **options)
    data = ctx.output_path("data")
    raw.where(F.col(_BAD).isNull()).drop(_BAD).write.mode("error").parquet(data)
    written = footers.count_rows(spark, data)
    ctx.metrics["files"] = len(files)
    line_by_line = params.format != "json" and not any(k.lower() in _NOT_LINE_BY_LINE for k in options)
    if line_by_line:
        text = spark.read.text(files).where(F.col("value") != "")
        if params.header:  # a header line in every file with a line (a grouped count: no distinct's two stages)
            per_file = [int(r["count"]) for r in text.groupBy(F.col("_metadata.file_path")).count().collect()]
            lines, headers = sum(per_file), len(per_file)
        else:
            lines, headers = text.count(), 0
        # Spark's reader skips blank lines (and comments): more lines than rows means a look at them
        if lines == written + headers:
            keep_rejected(
                ctx, no_rejected(ctx), rejected_n=0, rows_read=written, max_fraction=params.max_rejected_fraction
            )
            return {}
    # every column selected: the parser checks every field (it parses only the columns a query needs)
    bad = ctx.persist(raw.where(F.col(_BAD).isNotNull()).select("*", F.col("_metadata.file_path").alias(_FILE)))
    rejected_n = bad.count()
    reason = _csv_reason(schema, options) if params.format != "json" else _json_reason(schema)
    rejected = bad.select(F.col(_BAD).alias("line"), reason.alias("reason"), F.col(_FILE).alias("file"))
    keep_rejected(
        ctx,
        rejected,
        rejected_n=rejected_n,
        rows_read=written + rejected_n,
        max_fraction=params.max_rejected_fraction,
    )
    return {}


def _unparsable(tokens: Column, schema: StructType) -> list[Column]:
    """Per column: '<col>: cannot parse '<token>' as <type>' where the text is there but the value is not."""
    from pyspark.sql import functions as F

    found = []
    for field in schema.fields:
        token, value = tokens[field.name], F.col("`" + field.name.replace("`", "``") + "`")
        shown = F.concat(F.lit("'"), F.substring(token, 1, 60), F.lit("'"))
        message = F.concat(F.lit(f"{field.name}: cannot parse "), shown, F.lit(f" as {field.dataType.simpleString()}"))
        found.append(F.when(token.isNotNull() & value.isNull(), message))
    return found


def _csv_reason(schema: StructType, options: dict[str, str]) -> Column:
    """Why a csv line was rejected: its field count (countable when it holds no quote), else the first bad value."""
    from pyspark.sql import functions as F

    expected = len(schema.fields)
    strings = ", ".join(f"`{f.name.replace('`', '``')}` STRING" for f in schema.fields)
    parse_options = {k: v for k, v in options.items() if k not in ("header", "inferSchema", "enforceSchema")}
    tokens = F.from_csv(F.col(_BAD), strings, parse_options)
    quote = options.get("quote", '"')
    fields = F.size(F.split(F.col(_BAD), re.escape(options.get("sep", ",")), -1))
    countable = F.lit(True) if not quote else ~F.col(_BAD).contains(quote)
    return F.coalesce(
        F.when(countable & (fields != expected), F.format_string(f"expected {expected} fields, got %d", fields)),
        *_unparsable(tokens, schema),
        F.lit(f"does not parse as {expected} fields"),
    )


def _json_reason(schema: StructType) -> Column:
    """Why a json record was rejected: not JSON, not an object, or the first value not of its type."""
    from pyspark.sql import functions as F

    as_json = F.get_json_object(F.col(_BAD), "$")
    strings = ", ".join(f"`{f.name.replace('`', '``')}` STRING" for f in schema.fields)
    tokens = F.from_json(F.col(_BAD), strings)
    return F.coalesce(
        F.when(as_json.isNull(), F.lit("not valid JSON")),
        F.when(~F.ltrim(as_json).startswith("{"), F.lit("not a JSON object")),
        *_unparsable(tokens, schema),
        F.lit("does not fit the schema"),
    )


def check_parquet_schemas(ctx: StageContext, files: list[str], *, only_conflicts: bool) -> None:
    """Fail, naming the files, unless every Parquet file has the same columns and types.

    ``only_conflicts`` (mergeSchema, or a given schema): columns may be missing from some files,
    but a column present in several files must have one type.
    """
    schemas: dict[str, dict[str, str]] = {f: _parquet_columns(ctx, f) for f in files}
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for file, columns in schemas.items():
        groups.setdefault(tuple(sorted(columns.items())), []).append(file)
    if len(groups) < 2:
        return
    types: dict[str, dict[str, list[str]]] = {}
    for file, columns in schemas.items():
        for name, type_ in columns.items():
            types.setdefault(name, {}).setdefault(type_, []).append(file)
    problems = [
        f"column {name!r} is " + "; ".join(f"{t} in {_some(fs)}" for t, fs in sorted(by_type.items()))
        for name, by_type in sorted(types.items())
        if len(by_type) > 1
    ]
    if not only_conflicts:
        problems += [
            f"column {name!r} is missing from {_some(sorted(set(files) - {f for fs in by_type.values() for f in fs}))}"
            for name, by_type in sorted(types.items())
            if sum(len(fs) for fs in by_type.values()) < len(files)
        ]
    if problems:
        raise StageFailedError(
            f"the {len(files)} Parquet files disagree on the schema ({len(groups)} different schemas): "
            + "; ".join(problems[:10])
            + ("" if only_conflicts else "; rewrite the odd files, or set options: {mergeSchema: true}")
        )


def _some(files: list[str], limit: int = 3) -> str:
    shown = ", ".join(files[:limit])
    return f"{len(files)} file{'s' if len(files) > 1 else ''} ({shown}{', ...' if len(files) > limit else ''})"


def _parquet_columns(ctx: StageContext, file: str) -> dict[str, str]:
    """A file's columns and their types as Spark sees them (the footer only)."""
    if storage.is_local(file):
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import from_arrow_type

        try:
            schema = pq.read_schema(storage.local_path(file))
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a non-Parquet file: all unreadable
            raise StageFailedError(f"{file} is not a readable Parquet file: {exc}") from exc
        return {f.name: _spark_type_name(f.type, from_arrow_type) for f in schema}
    return {f.name: f.dataType.simpleString() for f in ctx.spark.read.parquet(file).schema.fields}


def _spark_type_name(arrow_type: Any, convert: Any) -> str:
    try:
        return str(convert(arrow_type).simpleString())
    except Exception:  # whatever Spark cannot map (unsigned, ...) is compared as Arrow names it, never a failure
        return str(arrow_type)
