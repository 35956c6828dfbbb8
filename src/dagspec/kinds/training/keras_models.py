"""The Keras architectures ``train_keras`` builds by name (functional models, built-in layers only).

Only built-in layers are used so a saved ``.keras`` file loads anywhere with plain
``keras.models.load_model`` (no custom objects, no ``safe_mode=False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagspec.kinds.training.keras_inputs import InputSpec


def build_model(
    architecture: str, specs: Sequence[InputSpec], num_classes: int, embedding_dim: int = 8
) -> Any:  # keras.Model
    """The named architecture over these inputs (CERN topology classifiers, or a CTR model)."""
    import keras
    from keras import layers

    by_col = {s.column: s for s in specs}
    first = specs[0]
    if architecture == "hlf_dense":
        # HLF classifier notebook: Dense 50-20-10 ReLU -> softmax
        x = inp = keras.Input(shape=first.shape, name=first.column)
        for units in (50, 20, 10):
            x = layers.Dense(units, activation="relu")(x)
        out = layers.Dense(num_classes, activation="softmax")(x)
        return keras.Model(inp, out, name="hlf_dense")
    if architecture == "particle_gru":
        # particle-sequence notebook: zero-padded particles masked, GRU(50), dropout 0.2
        inp = keras.Input(shape=first.shape, name=first.column)
        x = _gru_branch(inp)
        out = layers.Dense(num_classes, activation="softmax")(x)
        return keras.Model(inp, out, name="particle_gru")
    if architecture == "inclusive":
        # inclusive notebook: the GRU branch (after its dropout) concatenated with the raw HLF
        seq, hlf = specs
        seq_in = keras.Input(shape=seq.shape, name=seq.column)
        hlf_in = keras.Input(shape=hlf.shape, name=hlf.column)
        x = layers.Concatenate()([_gru_branch(seq_in), hlf_in])
        x = layers.Dense(25, activation="relu")(x)
        out = layers.Dense(num_classes, activation="softmax")(x)
        return keras.Model({seq.column: seq_in, hlf.column: hlf_in}, out, name="inclusive")
    if architecture in ("logistic", "wide_deep"):
        spec = by_col[first.column]
        (size,) = spec.shape
        idx_in = keras.Input(shape=(None,), dtype="int32", name=f"{spec.column}_indices")
        val_in = keras.Input(shape=(None,), dtype="float32", name=f"{spec.column}_values")
        # logistic regression over a hashed sparse vector = a weighted embedding bag of width 1
        wide = _embedding_bag(idx_in, val_in, int(size or 1), 1, "wide")
        if architecture == "logistic":
            out = layers.Dense(1, activation="sigmoid")(wide)
        else:
            deep = _embedding_bag(idx_in, val_in, int(size or 1), embedding_dim, "deep")
            deep = layers.Dense(32, activation="relu")(deep)
            deep = layers.Dense(16, activation="relu")(deep)
            out = layers.Dense(1, activation="sigmoid")(layers.Concatenate()([wide, deep]))
        inputs = {f"{spec.column}_indices": idx_in, f"{spec.column}_values": val_in}
        return keras.Model(inputs, out, name=architecture)
    raise ValueError(f"unknown architecture {architecture!r}")


def _gru_branch(inp: Any) -> Any:
    from keras import layers

    x = layers.Masking(mask_value=0.0)(inp)
    x = layers.GRU(50, activation="tanh", recurrent_activation="hard_sigmoid")(x)
    return layers.Dropout(0.2)(x)


def _embedding_bag(indices: Any, values: Any, size: int, dim: int, name: str) -> Any:
    """sum_k E[indices[k]] * values[k] -> (B, dim), from built-in layers only."""
    from keras import layers

    emb = layers.Embedding(size, dim, name=f"{name}_embedding")(indices)  # (B, K, dim)
    weights = layers.Reshape((-1, 1))(values)  # (B, K, 1)
    bag = layers.Dot(axes=1)([emb, weights])  # (B, dim, 1): contracts K
    return layers.Flatten()(bag)
