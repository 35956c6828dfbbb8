"""Kind ``read``: Parquet, CSV, TSV, JSON, Criteo logs or ROOT files into a table.

The files are listed when the stage is planned (their sizes and modification times are part of
the cache key) and exactly those files are read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from dagspec.errors import StageFailedError
from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


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
    # criteo
    id_column: bool = Field(default=False, description="criteo: the first column is an Id to drop")
    pad_short_rows: bool = Field(default=False, description="criteo: rows with trailing fields stripped")
    max_rejected_fraction: float = Field(default=0.001, ge=0, le=1)
    categoricals: Literal["string", "int"] = "string"
    # root
    tree: str | None = Field(default=None, description="root: TTree or RNTuple name (default: the only one)")
    branches: list[str] | dict[str, str] | None = Field(default=None, description="root: selection/renaming")
    entries_per_task: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _schema_only_where_it_applies(self) -> ReadParams:
        if self.schema_ == "criteo" and self.format not in ("csv", "tsv", "criteo"):
            raise ValueError("schema 'criteo' applies to csv, tsv or criteo files")
        return self


@kind("read", params=ReadParams, inputs={}, source_paths=lambda params, wired: [params.path])
def read(inputs: Inputs, params: ReadParams, ctx: StageContext) -> Outputs:
    """Read Parquet, CSV, TSV, JSON, Criteo logs or ROOT files into a table."""
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
    return {"data": read_table(ctx, path if params.format == "parquet" else files, params)}


def read_table(ctx: StageContext, paths: str | list[str], params: ReadParams) -> DataFrame:
    """parquet / csv / tsv / json through Spark's own readers."""
    from dagspec.kinds.ctr.columns import named_schema

    reader = ctx.spark.read.options(**{k: str(v) for k, v in params.options.items()})
    if params.schema_:
        reader = reader.schema(named_schema(params.schema_) or params.schema_)
    if params.format == "parquet":
        return reader.parquet(*([paths] if isinstance(paths, str) else paths))
    if params.format == "json":
        return reader.json(paths)
    delimiter = params.delimiter or ("\t" if params.format == "tsv" else ",")
    header = bool(params.header) if params.header is not None else False
    return reader.csv(paths, sep=delimiter, header=header, inferSchema=params.schema_ is None)
