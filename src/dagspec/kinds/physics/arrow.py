"""Arrow <-> numpy helpers for jagged physics columns (flat values + offsets, no Python loops)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def list_offsets(column: pa.Array) -> np.ndarray:
    """Offsets (from 0) of a list column; a null list counts as empty."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def flat_values(column: pa.Array, dtype: type = np.float64) -> np.ndarray:
    """The values of a list column, flattened (nulls as 0), as a numpy array."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    values = pc.list_flatten(column)
    if values.null_count:
        values = pc.fill_null(values, 0)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=dtype)


def nested_matrix(column: pa.Array, width: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """array<array<double>> with inner length ``width`` -> (outer offsets, values of shape (n, width))."""
    offsets = list_offsets(column)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    inner = pc.list_flatten(column)
    inner_offsets = list_offsets(inner)
    lengths = np.diff(inner_offsets)
    if len(lengths) and (lengths.min() != width or lengths.max() != width):
        bad = int(lengths[lengths != width][0])
        raise ValueError(f"{name}: every particle must have {width} features, found one with {bad}")
    values = flat_values(inner)
    return offsets, values.reshape(-1, width)


def nested_values(column: pa.Array, width: int) -> np.ndarray:
    """array<double> of fixed length ``width`` -> (rows, width) numpy array."""
    return flat_values(column).reshape(-1, width)


def to_nested_list(offsets: np.ndarray, matrix: np.ndarray) -> pa.Array:
    """(outer offsets, (n, width) values) -> array<array<double>> (Spark's ArrayType(ArrayType))."""
    n, width = matrix.shape
    inner_offsets = pa.array(np.arange(0, n * width + 1, width, dtype=np.int32))
    inner = pa.ListArray.from_arrays(inner_offsets, pa.array(np.ascontiguousarray(matrix, dtype=np.float64).ravel()))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), inner)


def to_list(matrix: np.ndarray) -> pa.Array:
    """(rows, width) values -> array<double>, one array per row."""
    rows, width = matrix.shape
    offsets = pa.array(np.arange(0, rows * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(matrix, dtype=np.float64).ravel()))


def event_index(offsets: np.ndarray) -> np.ndarray:
    """For each flat element, the index of the row (event) it belongs to."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
