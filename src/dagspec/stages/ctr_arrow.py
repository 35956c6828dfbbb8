"""Arrow batches -> the matrices XGBoost takes, without a Python loop over rows.

Spark ML vectors are stored (Parquet) and unwrapped (``unwrap_udt``) as
``struct<type: byte, size: int, indices: array<int>, values: array<double>>``: type 0 is sparse,
type 1 dense (indices null). Sparse batches become a CSR matrix straight from the Arrow list
buffers; numeric columns become a float32 matrix with NaN for nulls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def csr_from_vectors(vectors: pa.Array | pa.ChunkedArray, n_features: int) -> Any:
    """A ``scipy.sparse.csr_matrix`` (float32) from a column of unwrapped Spark ML vectors."""
    import scipy.sparse as sp

    if isinstance(vectors, pa.ChunkedArray):
        vectors = vectors.combine_chunks()
    assert isinstance(vectors, pa.StructArray)
    types = vectors.field("type").to_numpy(zero_copy_only=False)
    values = vectors.field("values")
    lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False).astype(np.int64)
    data = pc.list_flatten(values).to_numpy(zero_copy_only=False).astype(np.float32)
    if (types == 0).all():
        indices = pc.list_flatten(vectors.field("indices")).to_numpy(zero_copy_only=False).astype(np.int32)
    else:  # dense rows carry no indices: 0..size-1
        parts = []
        index_lists = vectors.field("indices").to_pylist()
        for row_type, row_indices, length in zip(types, index_lists, lengths, strict=True):
            parts.append(np.arange(length, dtype=np.int32) if row_type == 1 else np.asarray(row_indices, np.int32))
        indices = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return sp.csr_matrix((data, indices, indptr), shape=(len(lengths), n_features))


def dense_from_columns(batch: pa.RecordBatch | pa.Table, columns: list[str]) -> np.ndarray:
    """A float32 matrix of ``columns`` with NaN where a value is null (XGBoost's missing)."""
    out = np.empty((batch.num_rows, len(columns)), dtype=np.float32)
    for j, name in enumerate(columns):
        column = batch.column(name).cast(pa.float64())
        out[:, j] = column.to_numpy(zero_copy_only=False)  # nulls -> NaN
    return out


def features_of(batch: pa.RecordBatch | pa.Table, meta: dict[str, Any]) -> Any:
    """The model input of one batch as model.json describes it (vector column or numeric columns)."""
    if meta.get("features_col"):
        return csr_from_vectors(batch.column(meta["features_col"]), int(meta["num_features"]))
    return dense_from_columns(batch, list(meta["input_columns"]))
