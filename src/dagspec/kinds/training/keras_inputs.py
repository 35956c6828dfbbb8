"""Parquet -> numpy batches for Keras models, with pyarrow only (no Spark, no TensorFlow).

Training and inference share these encoders, so a model sees the same arrays in both. The unit of
work is a ``Piece``: a row range of one Parquet row group. Sharding cuts the global row order into
N contiguous ranges of (almost) equal size, so every worker has ``rows // N`` or ``rows // N + 1``
rows whatever the file and row-group layout is.

Column encodings (``InputSpec.encoding``):
- ``dense``: array<double>[D] or a Spark ML vector -> float32 (B, D);
- ``sequence``: array<array<double>> (particles x F) -> float32 (B, L, F), zero-padded (the
  models mask zeros) and truncated to ``max_particles`` when set, else L = longest in the batch;
- ``sparse``: a Spark ML (sparse or dense) vector -> two model inputs ``<col>_indices`` int32
  (B, K) and ``<col>_values`` float32 (B, K), K = most non-zeros in the batch, padded with
  index 0 / value 0 (a zero value adds nothing to the embedding bag).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

VECTOR_FIELDS = {"type", "size", "indices", "values"}


class InputDataError(ValueError):
    """A row or column the encoders cannot turn into model input (wrong length, null, type)."""


@dataclass(frozen=True)
class Piece:
    """Rows ``[start, start + length)`` of row group ``row_group`` of one Parquet file."""

    path: str
    row_group: int
    start: int
    length: int


@dataclass(frozen=True)
class InputSpec:
    """How one feature column becomes model input(s)."""

    column: str
    encoding: str  # dense | sequence | sparse
    shape: tuple[int | None, ...]  # per row: (D,), (L or None, F), (size,)

    def model_input_names(self) -> list[str]:
        """The Keras input names this column feeds."""
        if self.encoding == "sparse":
            return [f"{self.column}_indices", f"{self.column}_values"]
        return [self.column]

    def to_json(self) -> dict[str, Any]:
        """JSON form for model.json and job payloads."""
        return {**asdict(self), "shape": list(self.shape), "model_inputs": self.model_input_names()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InputSpec:
        """Inverse of to_json."""
        return cls(column=data["column"], encoding=data["encoding"], shape=tuple(data["shape"]))


def filesystem_for(path: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path inside it (local paths, file://, hdfs://, s3://...)."""
    if path.startswith("file:"):
        return pafs.LocalFileSystem(), path.removeprefix("file://").removeprefix("file:")
    if "://" in path:
        fs, inner = pafs.FileSystem.from_uri(path)
        return fs, str(inner)
    return pafs.LocalFileSystem(), path


def parquet_files(path: str) -> list[str]:
    """The Parquet part files of a dataset directory (or the file itself), in name order."""
    fs, inner = filesystem_for(path)
    info = fs.get_file_info(inner)
    if info.type == pafs.FileType.File:
        return [path]
    selector = pafs.FileSelector(inner, recursive=True)
    names = sorted(
        f.path
        for f in fs.get_file_info(selector)
        if f.type == pafs.FileType.File and f.base_name.endswith(".parquet") and not f.base_name.startswith(("_", "."))
    )
    prefix = path[: len(path) - len(inner)] if path.endswith(inner) else ""
    return [prefix + n for n in names]


def open_parquet(path: str) -> pq.ParquetFile:
    """A ParquetFile on any filesystem pyarrow knows."""
    fs, inner = filesystem_for(path)
    return pq.ParquetFile(fs.open_input_file(inner))


def list_pieces(path: str) -> list[Piece]:
    """One piece per non-empty row group of every file, in file and row-group order (metadata only)."""
    pieces = []
    for file in parquet_files(path):
        meta = open_parquet(file).metadata
        for rg in range(meta.num_row_groups):
            rows = meta.row_group(rg).num_rows
            if rows:
                pieces.append(Piece(file, rg, 0, rows))
    return pieces


def shard_pieces(pieces: Sequence[Piece], workers: int) -> list[list[Piece]]:
    """Cut the global row order into ``workers`` contiguous ranges of near-equal row counts."""
    total = sum(p.length for p in pieces)
    bounds = [total * w // workers for w in range(workers + 1)]
    shards: list[list[Piece]] = [[] for _ in range(workers)]
    offset = 0
    for piece in pieces:
        lo, hi = offset, offset + piece.length
        for w in range(workers):
            a, b = max(lo, bounds[w]), min(hi, bounds[w + 1])
            if a < b:
                shards[w].append(Piece(piece.path, piece.row_group, piece.start + a - lo, b - a))
        offset = hi
    return shards


def shard_rows(shard: Sequence[Piece]) -> int:
    """Rows in a shard."""
    return sum(p.length for p in shard)


def steps_for(rows_per_worker: Sequence[int], batch_size: int) -> int:
    """Steps every worker runs per epoch: enough for the largest shard (smaller ones wrap around)."""
    return max(1, math.ceil(max(rows_per_worker) / batch_size))


def read_piece(piece: Piece, columns: Sequence[str], cache: dict[str, pq.ParquetFile] | None = None) -> pa.Table:
    """The rows of one piece, only the given columns."""
    cache = {} if cache is None else cache
    if piece.path not in cache:
        cache[piece.path] = open_parquet(piece.path)
    table = cache[piece.path].read_row_group(piece.row_group, columns=list(columns))
    return table.slice(piece.start, piece.length)


def sample_table(path: str, columns: Sequence[str], rows: int = 64) -> pa.Table:
    """The first rows of a dataset (to learn widths and vector sizes)."""
    for piece in list_pieces(path):
        return read_piece(piece, columns).slice(0, rows)
    raise InputDataError(f"no rows in {path}")


# ---- schema -> specs ---------------------------------------------------------------------


def _is_vector(t: pa.DataType) -> bool:
    return bool(pa.types.is_struct(t)) and {t.field(i).name for i in range(t.num_fields)} >= VECTOR_FIELDS


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))


def infer_input_spec(table: pa.Table, column: str, encoding_hint: str, max_particles: int | None) -> InputSpec:
    """The spec of a feature column from its type and first rows.

    ``encoding_hint`` is what the architecture wants: ``dense`` (a fixed-width vector),
    ``sequence`` or ``sparse``.
    """
    if column not in table.column_names:
        raise InputDataError(f"feature column {column!r} not in the input; columns: {table.column_names}")
    t = table.schema.field(column).type
    col = table.column(column).combine_chunks()
    if encoding_hint == "sequence":
        if not (_is_list(t) and _is_list(t.value_type)):
            raise InputDataError(f"column {column!r} must be array<array<double>> for a sequence model, got {t}")
        inner = col.flatten()
        widths = pc.list_value_length(inner).to_numpy(zero_copy_only=False)
        if len(widths) == 0:
            raise InputDataError(f"column {column!r}: the first rows have no particles")
        return InputSpec(column, "sequence", (max_particles, int(widths[0])))
    if _is_vector(t):
        sizes = [v for v in col.field("size").to_pylist() if v is not None]
        lengths = pc.list_value_length(col.field("values")).to_numpy(zero_copy_only=False)
        size = int(sizes[0]) if sizes else int(lengths[0])
        return InputSpec(column, "sparse" if encoding_hint == "sparse" else "dense", (size,))
    if _is_list(t) and (pa.types.is_floating(t.value_type) or pa.types.is_integer(t.value_type)):
        width = int(pc.list_value_length(col).to_numpy(zero_copy_only=False)[0])
        return InputSpec(column, "sparse" if encoding_hint == "sparse" else "dense", (width,))
    raise InputDataError(f"column {column!r} has type {t}: expected array<double> or a Spark ML vector")


# ---- encoders ----------------------------------------------------------------------------


def _row_offsets(lengths: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return starts


def _check_no_nulls(arr: pa.Array, column: str) -> None:
    if arr.null_count:
        raise InputDataError(f"column {column!r} has {arr.null_count} null rows")


def _vector_entries(col: pa.StructArray, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(entries per row, flat indices, flat values) of Spark ML vectors, dense or sparse rows."""
    _check_no_nulls(col, column)
    values = col.field("values")
    lengths = pc.list_value_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat_values = values.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    sparse_row = col.field("type").to_numpy(zero_copy_only=False) == 0
    sparse_elem = np.repeat(sparse_row, lengths)
    flat_idx = np.arange(len(flat_values), dtype=np.int64) - np.repeat(_row_offsets(lengths), lengths)
    if sparse_row.any():
        flat_idx[sparse_elem] = col.field("indices").flatten().to_numpy(zero_copy_only=False)
    return lengths, flat_idx.astype(np.int32), flat_values


def _list_entries(col: pa.Array, column: str) -> tuple[np.ndarray, np.ndarray]:
    _check_no_nulls(col, column)
    lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)
    return lengths, col.flatten().to_numpy(zero_copy_only=False).astype(np.float32)


def encode_dense(col: pa.Array, spec: InputSpec) -> np.ndarray:
    """(B, D) float32 from array<double>[D] or Spark ML vectors of size D."""
    (width,) = spec.shape
    assert width is not None
    n = len(col)
    if _is_vector(col.type):
        lengths, idx, vals = _vector_entries(col, spec.column)
        if len(idx) and int(idx.max()) >= width:
            raise InputDataError(f"column {spec.column!r}: vector index {int(idx.max())} >= size {width}")
        out = np.zeros((n, width), dtype=np.float32)
        out[np.repeat(np.arange(n), lengths), idx] = vals
        return out
    lengths, flat = _list_entries(col, spec.column)
    bad = np.flatnonzero(lengths != width)
    if len(bad):
        raise InputDataError(f"column {spec.column!r}: a row has {int(lengths[bad[0]])} values, expected {width}")
    return flat.reshape(n, width)


def encode_sequence(col: pa.Array, spec: InputSpec) -> np.ndarray:
    """(B, L, F) float32, zero-padded or truncated to L (max_particles, or the longest row)."""
    max_len, width = spec.shape
    assert width is not None
    _check_no_nulls(col, spec.column)
    n = len(col)
    counts = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)
    particles = col.flatten()
    _check_no_nulls(particles, spec.column)
    widths = pc.list_value_length(particles).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(widths != width)
    if len(bad):
        raise InputDataError(f"column {spec.column!r}: a particle has {int(widths[bad[0]])} features, expected {width}")
    flat = particles.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, width)
    length = max_len if max_len is not None else max(1, int(counts.max()) if n else 1)
    rows = np.repeat(np.arange(n), counts)
    pos = np.arange(len(flat)) - np.repeat(_row_offsets(counts), counts)
    keep = pos < length
    out = np.zeros((n, length, width), dtype=np.float32)
    out[rows[keep], pos[keep]] = flat[keep]
    return out


def encode_sparse(col: pa.Array, spec: InputSpec) -> tuple[np.ndarray, np.ndarray]:
    """(indices int32 (B, K), values float32 (B, K)), K = most entries of a row in the batch."""
    (size,) = spec.shape
    assert size is not None
    n = len(col)
    if _is_vector(col.type):
        lengths, idx, vals = _vector_entries(col, spec.column)
    else:
        lengths, vals = _list_entries(col, spec.column)
        idx = (np.arange(len(vals)) - np.repeat(_row_offsets(lengths), lengths)).astype(np.int32)
    if len(idx) and (int(idx.max()) >= size or int(idx.min()) < 0):
        raise InputDataError(f"column {spec.column!r}: an index is outside [0, {size})")
    k = max(1, int(lengths.max()) if n else 1)
    rows = np.repeat(np.arange(n), lengths)
    pos = np.arange(len(vals)) - np.repeat(_row_offsets(lengths), lengths)
    out_idx = np.zeros((n, k), dtype=np.int32)
    out_val = np.zeros((n, k), dtype=np.float32)
    out_idx[rows, pos] = idx
    out_val[rows, pos] = vals
    return out_idx, out_val


def encode_features(table: pa.Table, specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """Model inputs (by Keras input name) of a batch."""
    out: dict[str, np.ndarray] = {}
    for spec in specs:
        col = table.column(spec.column).combine_chunks()
        if spec.encoding == "sequence":
            out[spec.column] = encode_sequence(col, spec)
        elif spec.encoding == "sparse":
            out[f"{spec.column}_indices"], out[f"{spec.column}_values"] = encode_sparse(col, spec)
        else:
            out[spec.column] = encode_dense(col, spec)
    return out


def encode_labels(table: pa.Table, column: str, task: str, num_classes: int) -> np.ndarray:
    """float32 (B, C) one-hot (multiclass) or (B, 1) in {0, 1} (binary)."""
    if column not in table.column_names:
        raise InputDataError(f"label column {column!r} not in the input; columns: {table.column_names}")
    col = table.column(column).combine_chunks()
    _check_no_nulls(col, column)
    if _is_list(col.type) or _is_vector(col.type):
        onehot = encode_dense(col, InputSpec(column, "dense", (num_classes,)))
        if task == "binary":
            return onehot[:, -1:].copy()
        return onehot
    values: np.ndarray = col.to_numpy(zero_copy_only=False).astype(np.float64)
    classes = 2 if task == "binary" else num_classes
    if not np.all((values == np.round(values)) & (values >= 0) & (values < classes)):
        raise InputDataError(f"label column {column!r} must hold classes 0..{classes - 1}")
    if task == "binary":
        return values.astype(np.float32).reshape(-1, 1)
    return np.eye(num_classes, dtype=np.float32)[values.astype(np.int64)]


# ---- batch streams -----------------------------------------------------------------------


def train_tables(
    shard: Sequence[Piece], columns: Sequence[str], batch_size: int, steps: int, rng: np.random.Generator | None
) -> Iterator[pa.Table]:
    """Exactly ``steps`` tables of ``batch_size`` rows, wrapping around the shard as needed.

    With ``rng``, the piece order and the rows within each piece are shuffled on every pass.
    """
    if not shard:
        raise InputDataError("a worker got an empty shard")
    cache: dict[str, pq.ParquetFile] = {}
    produced = 0
    carry: pa.Table | None = None
    while produced < steps:
        order = rng.permutation(len(shard)) if rng is not None else range(len(shard))
        for i in order:
            table = read_piece(shard[i], columns, cache)
            if rng is not None:
                table = table.take(pa.array(rng.permutation(table.num_rows)))
            if carry is not None and carry.num_rows:
                table = pa.concat_tables([carry, table])
            start = 0
            while table.num_rows - start >= batch_size and produced < steps:
                yield table.slice(start, batch_size)
                start += batch_size
                produced += 1
            if produced >= steps:
                return
            carry = table.slice(start)


def eval_tables(
    shard: Sequence[Piece], columns: Sequence[str], batch_size: int, steps: int
) -> Iterator[tuple[pa.Table, int]]:
    """Exactly ``steps`` (table of ``batch_size`` rows, real rows) pairs over the shard, once.

    The last real batch is padded by repeating its first row and shorter shards get all-padding
    batches, so every worker runs the same number of steps; padded rows get weight 0.
    """
    cache: dict[str, pq.ParquetFile] = {}
    produced = 0
    carry: pa.Table | None = None
    template: pa.Table | None = None
    for piece in shard:
        table = read_piece(piece, columns, cache)
        if carry is not None and carry.num_rows:
            table = pa.concat_tables([carry, table])
        start = 0
        while table.num_rows - start >= batch_size:
            yield table.slice(start, batch_size), batch_size
            template = table.slice(start, 1)
            start += batch_size
            produced += 1
        carry = table.slice(start)
    if carry is not None and carry.num_rows:
        template = carry.slice(0, 1)
        filler = carry.take(pa.array(np.zeros(batch_size - carry.num_rows, dtype=np.int64)))
        yield pa.concat_tables([carry, filler]), carry.num_rows
        produced += 1
    if template is None and produced < steps:
        raise InputDataError("a worker got an empty validation shard")
    while produced < steps:
        assert template is not None
        yield template.take(pa.array(np.zeros(batch_size, dtype=np.int64))), 0
        produced += 1
