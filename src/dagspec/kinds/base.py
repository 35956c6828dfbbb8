"""What a stage kind is: a params model, a function, and the `kind` decorator that ties them.

A kind module reads top to bottom: its params model (bounds, descriptions), then the function
decorated with ``@kind(...)`` (name, inputs, outputs). Heavy libraries (pyspark, tensorflow,
xgboost) are imported inside the function, so importing a kind module costs only pydantic: the
DAG file imports every kind on each parse to validate the specs.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from dagspec.errors import DagspecError
from dagspec.storage import is_uri, local_path, resolve_input_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KIND_ATTRIBUTE = "__dagspec_kind__"


class StageParams(BaseModel):
    """Base of every kind's params model: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class IOType(StrEnum):
    """What travels along an edge: a Parquet table or a directory of files (a model, plots)."""

    TABLE = "table"
    FILES = "files"


TABLE = IOType.TABLE
FILES = IOType.FILES


@dataclass(frozen=True)
class InputRole:
    """One named input of a kind."""

    type: IOType = IOType.TABLE
    required: bool = True


class Inputs(Mapping[str, "DataFrame | str"]):
    """A stage's inputs by role: a table input is a DataFrame over its committed Parquet, a files
    input the path of its committed folder. ``table`` and ``files`` give each typed (the spec's
    loader has checked every role's type against the kind's, so a mismatch is dagspec's bug)."""

    def __init__(self, items: Mapping[str, DataFrame | str] | None = None) -> None:
        self._items: dict[str, DataFrame | str] = dict(items or {})

    def __getitem__(self, role: str) -> DataFrame | str:
        return self._items[role]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def table(self, role: str) -> DataFrame:
        """The table input ``role``."""
        value = self._items[role]
        if isinstance(value, str):
            raise TypeError(f"input {role!r} is a files input ({value}), not a table")
        return value

    def optional_table(self, role: str) -> DataFrame | None:
        """The table input ``role``, or None when the spec wires none (an optional role)."""
        return self.table(role) if role in self._items else None

    def files(self, role: str) -> str:
        """The committed folder of the files input ``role``."""
        value = self._items[role]
        if not isinstance(value, str):
            raise TypeError(f"input {role!r} is a table, not a files input")
        return value

    def optional_files(self, role: str) -> str | None:
        """The committed folder of the files input ``role``, or None when the spec wires none."""
        return self.files(role) if role in self._items else None

    def tables(self) -> dict[str, DataFrame]:
        """Every input, each a table (a kind whose roles are all tables: ``sql``)."""
        return {role: self.table(role) for role in self._items}


Outputs = Mapping[str, "DataFrame"]
StageFunction = Callable[..., "Outputs | None"]
# Which paths a source kind reads, given its params and the input roles wired in the spec.
SourcePaths = Callable[[Any, frozenset[str]], list[str]]
# "any": a Connect client; "own": a spark-submit driver of its own; "process": its heavy work runs
# in the stage's own Python process, not on Spark (a Connect client when the server shares this
# machine, else a driver of its own that can be placed on the cluster with its resources)
DriverNeed = Literal["any", "own", "process"]
DriverNeedOf = Callable[[Any], tuple[DriverNeed, str]]


@dataclass(frozen=True)
class KindDef:
    """Everything dagspec knows about a stage kind.

    ``outputs`` maps output names to their type; when the names depend on params (``split``),
    ``outputs_from_params`` gives them. The first output is the default one (``stage`` alone
    refers to it). ``any_inputs`` lets a kind take arbitrary roles (``sql``); ``any_inputs_type``,
    when set, is the type every such role must have. ``fan_in`` kinds given a matrix stage take
    all its expansions. ``source_paths`` names the files a source stage reads: they are listed
    and their identity is part of the cache key. ``publishes`` names the params field holding the
    path (relative to the exports folder) a kind publishes its data to, outside the checkpoint
    tree: two stages publishing to one folder, or to folders inside each other, are refused when
    the specs load (``dagspec.spec.exports``). ``check_inputs``
    checks params against the stage's input roles when the spec loads: (param field, message) pairs.
    """

    name: str
    params: type[StageParams]
    function: StageFunction
    description: str
    inputs: Mapping[str, InputRole] = field(default_factory=dict)
    outputs: Mapping[str, IOType] = field(default_factory=lambda: {"data": IOType.TABLE})
    outputs_from_params: Callable[[Any], Mapping[str, IOType]] | None = None
    any_inputs: bool = False
    any_inputs_type: IOType | None = None
    fan_in: bool = False
    aliases: tuple[str, ...] = ()
    source_paths: SourcePaths | None = None
    publishes: str | None = None
    # Connect mode: the driver this kind needs and why (or a function of its params giving both),
    # and whether its Python workers import a model library worth keeping between stages (such
    # stages share a server session: Spark keys its worker pools by session)
    driver: DriverNeed | DriverNeedOf = "any"
    driver_reason: str = ""
    reuse_workers: bool = False
    check_inputs: Callable[[Any, Sequence[str]], list[tuple[str, str]]] | None = None

    def driver_need(self, params: StageParams | None) -> tuple[DriverNeed, str]:
        """The driver a stage of these params needs, and why (params unknown: the strictest)."""
        if not callable(self.driver):
            return self.driver, self.driver_reason
        if params is None:
            return "own", self.driver_reason or "its need depends on its params"
        return self.driver(params)

    @property
    def module(self) -> str:
        """The module defining the kind's function (whose source is part of the cache key)."""
        return str(self.function.__module__)

    def published_path(self, params: StageParams) -> str | None:
        """The path (relative to the exports folder) these params publish to; None: the kind publishes nothing."""
        return str(getattr(params, self.publishes)) if self.publishes else None

    def output_types(self, params: StageParams | None) -> Mapping[str, IOType]:
        """Output names and types for these params (None: params not known until run time)."""
        if self.outputs_from_params is not None and params is not None:
            return self.outputs_from_params(params)
        return self.outputs


F = TypeVar("F", bound=StageFunction)


def kind(
    name: str,
    *,
    params: type[StageParams],
    inputs: Mapping[str, IOType | InputRole] | None = None,
    outputs: Mapping[str, IOType] | None = None,
    description: str | None = None,
    outputs_from_params: Callable[[Any], Mapping[str, IOType]] | None = None,
    any_inputs: bool = False,
    any_inputs_type: IOType | None = None,
    fan_in: bool = False,
    aliases: tuple[str, ...] = (),
    source_paths: SourcePaths | None = None,
    publishes: str | None = None,
    driver: DriverNeed | DriverNeedOf = "any",
    driver_reason: str = "",
    reuse_workers: bool = False,
    check_inputs: Callable[[Any, Sequence[str]], list[tuple[str, str]]] | None = None,
) -> Callable[[F], F]:
    """Declare a function as stage kind ``name``; the function itself is returned unchanged.

    The description defaults to the first line of the function's docstring.
    """

    if publishes is not None and publishes not in params.model_fields:
        raise TypeError(f"kind {name!r}: publishes={publishes!r} is no field of {params.__name__}")

    def declare(function: F) -> F:
        roles = {
            role: spec if isinstance(spec, InputRole) else InputRole(type=IOType(spec))
            for role, spec in (inputs or {}).items()
        }
        summary = description or (function.__doc__ or "").strip().split("\n")[0]
        definition = KindDef(
            name=name,
            params=params,
            function=function,
            description=summary,
            inputs=roles,
            outputs=dict(outputs) if outputs is not None else {"data": IOType.TABLE},
            outputs_from_params=outputs_from_params,
            any_inputs=any_inputs,
            any_inputs_type=any_inputs_type,
            fan_in=fan_in,
            aliases=aliases,
            source_paths=source_paths,
            publishes=publishes,
            driver=driver,
            driver_reason=driver_reason,
            reuse_workers=reuse_workers,
            check_inputs=check_inputs,
        )
        setattr(function, KIND_ATTRIBUTE, definition)
        return function

    return declare


def is_connect(spark: object) -> bool:
    """Is ``spark`` a Spark Connect client session (no SparkContext, no RDDs, no JVM here)?"""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: Any) -> int:
    """The session's default number of tasks; a Connect client asks the server's shuffle setting."""
    if is_connect(spark):
        return int(spark.conf.get("spark.sql.shuffle.partitions") or 2)
    return int(spark.sparkContext.defaultParallelism)


def num_partitions(df: DataFrame) -> int:
    """Partitions of ``df``; a Connect client, which cannot see them, gets the default parallelism."""
    if is_connect(df.sparkSession):
        return default_parallelism(df.sparkSession)
    return int(df.rdd.getNumPartitions())


def rows_in_partitions(spark: SparkSession, rows: list[tuple[Any, ...]], schema: Any, partitions: int) -> DataFrame:
    """A small driver-side list as a DataFrame of ``partitions`` partitions (one row each when equal).

    A classic session slices it with ``parallelize``; a Connect client has no RDDs, and a
    round-robin repartition of a one-partition DataFrame deals the rows out one per partition.
    """
    if is_connect(spark):
        return spark.createDataFrame(rows, schema).repartition(partitions)
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), schema)


def suggest(name: str, candidates: Sequence[str]) -> str:
    """A ' (did you mean ...?)' hint, or ''."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def kind_of(value: object) -> KindDef | None:
    """The KindDef a ``@kind`` function carries, else None."""
    found = getattr(value, KIND_ATTRIBUTE, None)
    return found if isinstance(found, KindDef) else None


@dataclass(frozen=True)
class InputSource:
    """Where one input role of the running stage comes from."""

    stage: str
    output: str
    path: str
    type: IOType
    fingerprint: str = ""  # of the stage that wrote it
    content: str | None = None  # the output's content digest (None: not recorded)
    # every committed folder the input reads: one, or a window's partitions (then ``path`` is "")
    paths: tuple[str, ...] = ()


@dataclass
class StageContext:
    """What a stage function may use besides its inputs and params."""

    spark: SparkSession
    dag_id: str
    stage_name: str
    fingerprint: str
    home: Path
    storage_root: str
    work_dir: str
    scratch_root: str
    sources: Mapping[str, InputSource] = field(default_factory=dict)
    source_files: list[str] = field(default_factory=list)
    publish_path: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    written_name: str = ""  # the stage as written in the spec: a matrix stage for all its expansions
    persisted: list[DataFrame] = field(default_factory=list)
    cache_level: Any = None  # the StorageLevel persist uses (the runtime: DISK_ONLY); None: Spark's default
    expected_rows: dict[str, tuple[int, Callable[[], DataFrame]]] = field(default_factory=dict)

    def expect_rows(self, output: str, rows: int, otherwise: Callable[[], DataFrame]) -> None:
        """Output ``output`` must hold exactly ``rows`` rows: when the table written does not, the
        runtime writes ``otherwise()`` (a slower plan that holds them) in its place and checks it."""
        self.expected_rows[output] = (rows, otherwise)

    def persist(self, df: DataFrame) -> DataFrame:
        """``df`` cached (memory, then disk) until this stage's outputs are written, then released.

        The Connect server is long-lived and shared: a cache a stage leaves behind stays in its heap
        for every later stage (at 10^6 Criteo rows, a read's 800 MB left the next reads out of memory).
        The runtime caches on local disk (``cache_level``): a partition cached in memory-and-disk is
        unrolled in the heap before it spills, and at 10^7 rows that ran the server's 4g heap out.
        """
        kept = df.persist(self.cache_level) if self.cache_level is not None else df.persist()
        self.persisted.append(kept)
        return kept

    def release(self) -> None:
        """Drop every cache :meth:`persist` made (the runtime calls it once the outputs are written)."""
        while self.persisted:
            self.persisted.pop().unpersist()

    @property
    def written_stage(self) -> str:
        """The stage's name as written in the spec (``sample`` for ``sample__100``)."""
        return self.written_name or self.stage_name

    def output_path(self, name: str) -> str:
        """Where output ``name`` is written during this attempt (inside the temporary dir)."""
        return f"{self.work_dir}/{name}"

    def local_output_dir(self, name: str) -> Path:
        """A local directory for a files output (models, plots); created on first use."""
        path = self.output_path(name)
        if is_uri(path) and not path.startswith("file://"):
            raise DagspecError(f"files outputs need a local or file:// storage root, got {path}")
        local = Path(local_path(path))
        local.mkdir(parents=True, exist_ok=True)
        return local

    def scratch_dir(self, name: str) -> Path:
        """A local directory that survives a failed attempt of this fingerprint (for resuming)."""
        path = Path(local_path(self.scratch_root)) / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def input_path(self, role: str) -> str | None:
        """The committed path an input role reads (None when the role is not wired); an input reading
        several partitions has none (``input_paths``)."""
        source = self.sources.get(role)
        if source is not None and not source.path and len(source.paths) != 1:
            raise DagspecError(
                f"stage {self.stage_name!r}: input {role!r} reads {len(source.paths)} partitions of {source.stage!r}, "
                "and this kind reads one table folder: read it through a stage that is not partitioned first"
            )
        return (source.path or source.paths[0]) if source else None

    def input_paths(self, role: str) -> list[str]:
        """Every committed folder an input role reads: one, or each partition of a window ([] when not wired)."""
        source = self.sources.get(role)
        if source is None:
            return []
        return list(source.paths) or [source.path]

    def input_stage(self, role: str) -> str | None:
        """The name of the stage an input role reads from (None when not wired)."""
        source = self.sources.get(role)
        return source.stage if source else None

    def resolve(self, path: str) -> str:
        """A read path: URIs and absolute paths as they are, relative ones against the project."""
        return resolve_input_path(path, self.home)
