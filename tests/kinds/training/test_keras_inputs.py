"""Parquet -> numpy encoders and sharding of train_keras (pyarrow only: no Spark, no TensorFlow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagspec.kinds.training.keras_inputs import (
    InputDataError,
    InputSpec,
    Piece,
    encode_dense,
    encode_labels,
    encode_sequence,
    encode_sparse,
    eval_tables,
    list_pieces,
    shard_pieces,
    shard_rows,
    steps_for,
    train_tables,
)
from dagspec.kinds.training.train_keras import TrainKerasParams

VECTOR = pa.struct(
    [("type", pa.int8()), ("size", pa.int32()), ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float64()))]
)


def _write_parts(folder: Path, sizes: list[int], row_group_size: int = 1000) -> None:
    folder.mkdir()
    start = 0
    for i, n in enumerate(sizes):
        ids = pa.array(np.arange(start, start + n), pa.int64())
        pq.write_table(pa.table({"id": ids}), folder / f"part-{i:05d}.parquet", row_group_size=row_group_size)
        start += n


def test_shards_are_contiguous_balanced_and_cover_every_row(tmp_path: Path) -> None:
    _write_parts(tmp_path / "d", [7, 0, 20, 3], row_group_size=6)  # an empty file, several row groups
    pieces = list_pieces(str(tmp_path / "d"))
    shards = shard_pieces(pieces, 3)
    assert [shard_rows(s) for s in shards] == [10, 10, 10]
    seen = []
    for shard in shards:
        for table in train_tables(shard, ["id"], 5, 2, rng=None):
            seen.extend(table.column("id").to_pylist())
    assert sorted(seen) == list(range(30))
    assert steps_for([10, 10, 11], 5) == 3


def test_train_tables_wrap_short_shards_and_shuffle_deterministically(tmp_path: Path) -> None:
    _write_parts(tmp_path / "d", [7])
    shard = list_pieces(str(tmp_path / "d"))
    batches = list(train_tables(shard, ["id"], 4, 3, rng=np.random.default_rng(1)))
    assert [b.num_rows for b in batches] == [4, 4, 4]  # 12 rows from 7: wraps around
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert sorted(ids[:7]) == list(range(7)) and ids[:7] != list(range(7))
    again = train_tables(shard, ["id"], 4, 3, rng=np.random.default_rng(1))
    assert [i for b in again for i in b.column("id").to_pylist()] == ids


def test_eval_tables_pad_with_zero_weight_rows_up_to_the_common_step_count(tmp_path: Path) -> None:
    _write_parts(tmp_path / "d", [5])
    shard = list_pieces(str(tmp_path / "d"))
    out = list(eval_tables(shard, ["id"], 4, 3))
    assert [(t.num_rows, real) for t, real in out] == [(4, 4), (4, 1), (4, 0)]
    assert out[1][0].column("id").to_pylist()[0] == 4


def test_sequences_are_zero_padded_or_truncated_per_event() -> None:
    events = [[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]]
    col = pa.array(events, pa.list_(pa.list_(pa.float64())))
    padded = encode_sequence(col, InputSpec("GRU_input", "sequence", (None, 2)))
    assert padded.shape == (2, 3, 2)
    np.testing.assert_array_equal(padded[0], [[1, 2], [0, 0], [0, 0]])
    truncated = encode_sequence(col, InputSpec("GRU_input", "sequence", (2, 2)))
    np.testing.assert_array_equal(truncated[1], [[3, 4], [5, 6]])
    bad = pa.array([[[1.0, 2.0, 3.0]]], pa.list_(pa.list_(pa.float64())))
    with pytest.raises(InputDataError, match="a particle has 3 features, expected 2"):
        encode_sequence(bad, InputSpec("GRU_input", "sequence", (None, 2)))


def test_spark_ml_vectors_dense_and_sparse_rows() -> None:
    col = pa.array(
        [
            {"type": 0, "size": 6, "indices": [1, 4], "values": [0.5, 2.0]},
            {"type": 1, "size": None, "indices": None, "values": [1.0, 0.0, 0.0, 0.0, 0.0, 3.0]},
        ],
        VECTOR,
    )
    idx, val = encode_sparse(col, InputSpec("features", "sparse", (6,)))
    assert idx.shape == val.shape == (2, 6)
    assert idx[0, :2].tolist() == [1, 4] and val[0, :3].tolist() == [0.5, 2.0, 0.0]
    dense = encode_dense(col, InputSpec("features", "dense", (6,)))
    np.testing.assert_array_equal(dense, [[0, 0.5, 0, 0, 2, 0], [1, 0, 0, 0, 0, 3]])
    with pytest.raises(InputDataError, match="outside"):
        encode_sparse(col, InputSpec("features", "sparse", (3,)))


def test_labels_one_hot_or_integer() -> None:
    onehot = pa.table({"y": pa.array([[0.0, 1.0, 0.0]], pa.list_(pa.float64()))})
    assert encode_labels(onehot, "y", "multiclass", 3).tolist() == [[0, 1, 0]]
    ints = pa.table({"y": pa.array([2, 0], pa.int32())})
    assert encode_labels(ints, "y", "multiclass", 3).tolist() == [[0, 0, 1], [1, 0, 0]]
    assert encode_labels(ints.slice(1), "y", "binary", 2).tolist() == [[0.0]]
    with pytest.raises(InputDataError, match=r"classes 0\.\.1"):
        encode_labels(ints, "y", "binary", 2)
    wrong_width = pa.table({"y": pa.array([[1.0, 0.0]], pa.list_(pa.float64()))})
    with pytest.raises(InputDataError, match="has 2 values, expected 3"):
        encode_labels(wrong_width, "y", "multiclass", 3)


def test_params_defaults_follow_the_architecture() -> None:
    inclusive = TrainKerasParams(architecture="inclusive")
    assert inclusive.input_columns == ["GRU_input", "HLF_input"]
    assert inclusive.label == "encoded_label" and inclusive.task == "multiclass"
    ctr = TrainKerasParams(architecture="wide_deep")
    assert (ctr.features, ctr.label, ctr.task) == ("features", "label", "binary")
    with pytest.raises(ValueError, match="hlf_col applies to architecture 'inclusive' only"):
        TrainKerasParams(architecture="hlf_dense", hlf_col="x")
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        TrainKerasParams(architecture="hlf_dense", workers=0)


def test_pieces_are_json_round_trippable() -> None:
    piece = Piece("/x/part-0.parquet", 2, 5, 10)
    assert Piece(**vars(piece)) == piece
