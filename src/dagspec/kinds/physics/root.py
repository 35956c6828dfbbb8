"""``read`` with ``format: root``: TTrees and RNTuples through uproot, one Spark task per file or range.

The driver expands the glob (file names only) and opens the first file's metadata plus one entry
to learn the column types. The data is read inside Spark tasks: a small DataFrame of
(file, start, stop) ranges goes through ``mapInArrow``, whose function opens its file with uproot
and yields Arrow batches (jagged branches become array columns). With ``entries_per_task`` the
entry counts per file are themselves gathered by a Spark job (one tiny row per file).

Unsigned integers are widened to the next signed type (uint8 -> short, uint16 -> int, uint32 ->
long), which holds every value; uint64 becomes long too, and a value above 2^63 - 1 fails the task
with the branch and file named instead of wrapping to a negative number.
"""

from __future__ import annotations

import difflib
import glob
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from dagspec.errors import StageFailedError
from dagspec.kinds.base import rows_in_partitions

if TYPE_CHECKING:
    from dagspec.kinds.base import StageContext

TREE_CLASSES = ("TTree", "ROOT::RNTuple")
ENTRIES_PER_BATCH = 50_000  # bounds the memory of one task, whatever its range
_RANGES = T.StructType(
    [
        T.StructField("file", T.StringType(), nullable=False),
        T.StructField("start", T.LongType(), nullable=False),
        T.StructField("stop", T.LongType(), nullable=False),
    ]
)
_UNSIGNED = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}


class RootReadParams(Protocol):
    """The fields of ``read``'s params this reader uses (``ReadParams`` has them)."""

    @property
    def tree(self) -> str | None: ...

    @property
    def branches(self) -> list[str] | dict[str, str] | None: ...

    @property
    def entries_per_task(self) -> int | None: ...


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def expand_root_paths(path: str) -> list[str]:
    """The files a path or glob names (local paths and file:// URIs; other URIs go to uproot as is)."""
    if "://" in path and not path.startswith("file://"):
        return [path]
    local = path.removeprefix("file://")
    files = sorted(glob.glob(local)) if glob.has_magic(local) else [local]
    files = [f for f in files if os.path.isfile(f)]
    if not files:
        raise StageFailedError(f"read root: no file matches {path}")
    return files


@contextmanager
def open_tree(file: str, tree: str | None) -> Iterator[Any]:
    """The TTree/RNTuple ``tree`` (or the file's only one) of ``file``; the file is closed on exit."""
    import uproot

    with uproot.open(file) as handle:
        yield _find_tree(handle, file, tree)


def _find_tree(handle: Any, file: str, tree: str | None) -> Any:
    if tree is None:
        candidates = sorted({k.split(";")[0] for k, c in handle.classnames().items() if c in TREE_CLASSES})
        if len(candidates) != 1:
            raise StageFailedError(f"read root: {file} holds trees {candidates}; set 'tree' to one of them")
        tree = candidates[0]
    try:
        obj = handle[tree]
    except KeyError as exc:
        names = [k.split(";")[0] for k in handle.classnames()]
        raise StageFailedError(f"read root: {file} has no tree {tree!r}{_did_you_mean(tree, names)}") from exc
    if not (hasattr(obj, "arrays") and hasattr(obj, "num_entries")):
        raise StageFailedError(f"read root: {tree!r} in {file} is not a TTree or RNTuple")
    return obj


def _top_level_names(obj: Any) -> list[str]:
    """Top-level branches/fields; names starting with '_' (RNTuple's anonymous collections) are skipped."""
    try:
        names = obj.keys(recursive=False)
    except TypeError:
        names = obj.keys()
    return [n for n in names if "." not in n and "/" not in n and not n.startswith("_")]


def _spark_arrow_type(data_type: pa.DataType) -> pa.DataType:
    """Arrow types Spark accepts: unsigned ints widened, lists with 32-bit offsets."""
    if data_type in _UNSIGNED:
        return _UNSIGNED[data_type]
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        field = data_type.value_field
        return pa.list_(field.with_type(_spark_arrow_type(field.type)))
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(_spark_arrow_type(f.type)) for f in data_type])
    if pa.types.is_large_string(data_type):
        return pa.string()
    return data_type


def read_arrow(obj: Any, branches: Sequence[str], renames: dict[str, str], start: int, stop: int) -> pa.Table:
    """Entries [start, stop) of ``branches`` as an Arrow table with Spark-compatible types."""
    import awkward as ak

    arrays = obj.arrays(list(branches), entry_start=start, entry_stop=stop, library="ak")
    arrays = arrays[list(branches)]  # RNTuples also return their anonymous collections
    table = ak.to_arrow_table(arrays, list_to32=True, string_to32=True, extensionarray=False)
    table = table.rename_columns([renames.get(name, name) for name in table.column_names])
    fields = [pa.field(f.name, _spark_arrow_type(f.type), nullable=f.nullable) for f in table.schema]
    if not table.num_rows:
        return pa.Table.from_batches([], pa.schema(fields))
    return cast_checked(table, pa.schema(fields), renames, _file_of(obj))


def _file_of(obj: Any) -> str:
    return str(getattr(getattr(obj, "file", None), "file_path", "") or "")


def cast_checked(table: pa.Table, schema: pa.Schema, renames: dict[str, str], file: str) -> pa.Table:
    """``table`` cast to ``schema`` column by column; a value that does not fit names its branch."""
    import pyarrow.compute as pc

    if table.schema == schema:
        return table
    branch_of = {new: old for old, new in renames.items()}
    columns = []
    for field, column in zip(schema, table.columns, strict=True):
        try:
            columns.append(column if column.type == field.type else pc.cast(column, field.type, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            branch = branch_of.get(field.name, field.name)
            named = f"branch {branch!r}" + (f" (column {field.name!r})" if branch != field.name else "")
            raise StageFailedError(
                f"read root: {named} of {file or 'the file'} holds {column.type} values that do not fit "
                f"{field.type}: {exc}"
            ) from None
    return pa.Table.from_arrays(columns, schema=schema)


def _selection(obj: Any, params: RootReadParams, file: str) -> tuple[list[str], dict[str, str]]:
    available = _top_level_names(obj)
    every = set(obj.keys())
    if params.branches is None:
        return available, {}
    wanted = list(params.branches)
    unknown = [b for b in wanted if b not in every]
    if unknown:
        hint = _did_you_mean(unknown[0], available)
        raise StageFailedError(f"read root: {file} has no branch(es) {unknown}{hint}; branches: {available}")
    renames = dict(params.branches) if isinstance(params.branches, dict) else {}
    return wanted, renames


def _entry_counts(spark: SparkSession, files: list[str], tree: str | None) -> list[tuple[str, int]]:
    """(file, entries) for every file, each counted by a Spark task (only the counts come back)."""

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            names = batch.column(0).to_pylist()
            entries = []
            for f in names:
                with open_tree(f, tree) as obj:
                    entries.append(int(obj.num_entries))
            yield pa.RecordBatch.from_arrays([pa.array(names), pa.array(entries, pa.int64())], ["file", "entries"])

    files_df = rows_in_partitions(spark, [(f,) for f in files], "file string", min(len(files), 64))
    rows = files_df.mapInArrow(count, "file string, entries long").collect()
    by_file = {r["file"]: r["entries"] for r in rows}
    return [(f, by_file[f]) for f in files]


def read_root(spark: SparkSession, path: str, params: RootReadParams, ctx: StageContext | None = None) -> DataFrame:
    """A DataFrame over the TTree/RNTuple entries of every file ``path`` names."""
    files = expand_root_paths(path)
    with open_tree(files[0], params.tree) as first:
        tree = params.tree or str(first.name).split(";")[0]
        tree_class = type(first).__name__
        branches, renames = _selection(first, params, files[0])
        arrow_schema = read_arrow(first, branches, renames, 0, min(1, int(first.num_entries))).schema
    from pyspark.sql.pandas.types import from_arrow_schema

    spark_schema = from_arrow_schema(arrow_schema)
    if params.entries_per_task is None:
        ranges = [(f, 0, -1) for f in files]
    else:
        step = params.entries_per_task
        ranges = [(f, s, min(s + step, n)) for f, n in _entry_counts(spark, files, tree) for s in range(0, n, step)]
    if ctx is not None:
        ctx.metrics.update(root_files=len(files), root_tasks=len(ranges), root_tree=tree, root_class=tree_class)
    if not ranges:
        return spark.createDataFrame([], spark_schema)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for file, start, stop in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
                with open_tree(file, tree) as obj:
                    stop = int(obj.num_entries) if stop < 0 else stop
                    for lo in range(start, stop, ENTRIES_PER_BATCH):
                        table = read_arrow(obj, branches, renames, lo, min(lo + ENTRIES_PER_BATCH, stop))
                        # same branches, other widths in another file: cast, or name the branch
                        table = cast_checked(table, arrow_schema, renames, file)
                        yield from table.to_batches()

    # parallelize slices evenly: one range per partition, so each range is one task
    range_df = rows_in_partitions(spark, ranges, _RANGES, len(ranges))
    return range_df.mapInArrow(read, spark_schema)
