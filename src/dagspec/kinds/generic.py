"""The generic kinds: read, sql, undersample, split, sample, export."""

from __future__ import annotations

import math
import posixpath
from typing import Literal

from pydantic import Field, field_validator, model_validator

from dagspec.registry import InputRole, IOType, KindDef, StageParams, register

NAMED_SCHEMAS = ("criteo",)


def check_relative_path(path: str) -> str:
    """A path that must stay under the storage root: relative, no '..', no URI scheme."""
    if "://" in path or path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise ValueError(f"must be a path relative to storage.root, got {path!r}")
    normalized = posixpath.normpath(path.replace("\\", "/"))
    if normalized == ".." or normalized.startswith("../") or normalized in (".", ""):
        raise ValueError(f"must stay inside storage.root, got {path!r}")
    return normalized


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


register(
    KindDef(
        name="read",
        params=ReadParams,
        function="dagspec.stages.generic:read",
        version="1",
        description="Read Parquet, CSV, TSV, JSON, Criteo logs or ROOT files into a table.",
        inputs={},
        outputs={"data": IOType.TABLE},
    )
)


class SqlParams(StageParams):
    """A Spark SQL query; each input is a temporary view named by its role."""

    query: str = Field(min_length=1)


register(
    KindDef(
        name="sql",
        params=SqlParams,
        function="dagspec.stages.generic:sql",
        version="1",
        description="Run a Spark SQL query over the inputs (views named by their roles).",
        any_inputs=True,
    )
)


class UndersampleParams(StageParams):
    """Undersample to the minority class count, or to explicit per-class counts."""

    label_col: str = "label"
    seed: int = 42
    target_counts: dict[str, int] | None = Field(
        default=None, description="class value (as a string) -> rows to keep; default: the minority count"
    )

    @field_validator("target_counts")
    @classmethod
    def _counts_positive(cls, counts: dict[str, int] | None) -> dict[str, int] | None:
        if counts is not None and (not counts or any(v < 1 for v in counts.values())):
            raise ValueError("target_counts must map each class to a count >= 1")
        return counts


register(
    KindDef(
        name="undersample",
        params=UndersampleParams,
        function="dagspec.stages.generic:undersample",
        version="1",
        description="Keep exactly the minority class count of every class (or given counts).",
        inputs={"data": InputRole()},
    )
)


class SplitParams(StageParams):
    """Random split into named outputs (Spark's randomSplit), optionally shuffling some outputs."""

    fractions: dict[str, float] = Field(min_length=2)
    seed: int = 42
    shuffle: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _fractions_make_sense(self) -> SplitParams:
        for name, fraction in self.fractions.items():
            if not name.isidentifier():
                raise ValueError(f"output name {name!r} must be an identifier")
            if not 0 < fraction < 1:
                raise ValueError(f"fraction {name!r} must be in (0, 1), got {fraction}")
        if not math.isclose(sum(self.fractions.values()), 1.0, abs_tol=1e-6):
            raise ValueError(f"fractions must sum to 1, got {sum(self.fractions.values())}")
        unknown = [s for s in self.shuffle if s not in self.fractions]
        if unknown:
            raise ValueError(f"shuffle names {unknown} that are not outputs ({', '.join(self.fractions)})")
        return self


register(
    KindDef(
        name="split",
        params=SplitParams,
        function="dagspec.stages.generic:split",
        version="1",
        description="Split randomly into named outputs (stage.train, stage.test, ...).",
        inputs={"data": InputRole()},
        outputs={"train": IOType.TABLE, "test": IOType.TABLE},
        outputs_from_params=lambda p: {name: IOType.TABLE for name in p.fractions},
    )
)


class SampleParams(StageParams):
    """Exactly ``n`` rows (output ``data``), or one output ``n<size>`` per entry of ``sizes``."""

    n: int | None = Field(default=None, ge=1)
    sizes: list[int] | None = Field(default=None, min_length=1)
    nested: bool = Field(default=True, description="sizes: each sample contains the smaller ones")
    seed: int = 42

    @model_validator(mode="after")
    def _n_or_sizes(self) -> SampleParams:
        if (self.n is None) == (self.sizes is None):
            raise ValueError("give exactly one of 'n' or 'sizes'")
        if self.sizes is not None and (any(s < 1 for s in self.sizes) or len(set(self.sizes)) != len(self.sizes)):
            raise ValueError("sizes must be distinct and >= 1")
        return self

    def output_sizes(self) -> dict[str, int]:
        """Output name -> exact row count."""
        if self.sizes is None:
            assert self.n is not None
            return {"data": self.n}
        return {f"n{size}": size for size in sorted(self.sizes)}


register(
    KindDef(
        name="sample",
        params=SampleParams,
        function="dagspec.stages.generic:sample",
        version="1",
        description="Exactly n rows at random (seeded), or several exact sizes, nested or independent.",
        inputs={"data": InputRole()},
        outputs_from_params=lambda p: {name: IOType.TABLE for name in p.output_sizes()},
    )
)


class ExportParams(StageParams):
    """Write a table to a fixed path under storage.root, replacing the previous export atomically."""

    format: Literal["parquet", "csv", "libsvm", "vw"] = "parquet"
    path: str
    partitions: int | None = Field(default=None, ge=1)
    header: bool = True

    @field_validator("path")
    @classmethod
    def _path_stays_under_root(cls, path: str) -> str:
        return check_relative_path(path)


register(
    KindDef(
        name="export",
        params=ExportParams,
        function="dagspec.stages.generic:export",
        version="1",
        description="Write a table to a stable path (Parquet with a partition count, CSV, LibSVM or VW text).",
        inputs={"data": InputRole()},
        outputs={},
    )
)
