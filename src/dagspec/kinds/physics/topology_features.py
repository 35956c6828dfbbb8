"""Kind ``topology_features``: the seed's feature preparation (HLF_input, encoded_label, GRU_input).

All per-event work runs inside ``mapInArrow`` on numpy arrays of whole Arrow batches (flat particle
arrays + offsets, see ``topology``); only small aggregates (min/max, counts) ever reach the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.class_names import CLASS_NAMES_KEY
from dagspec.kinds.physics.names import CLASS_NAMES, PARTICLE_FEATURE_NAMES

if TYPE_CHECKING:
    import numpy as np
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

N_FEATURES = len(PARTICLE_FEATURE_NAMES)


class TopologyFeaturesParams(StageParams):
    """The seed's feature preparation: HLF_input, encoded_label, GRU_input; input columns kept
    (the raw hfeatures and lfeatures only with ``keep_raw``)."""

    hfeatures_col: str = "hfeatures"
    lfeatures_col: str = "lfeatures"
    label_col: str = "label"
    hlf_size: int = Field(default=14, ge=1, description="length of every hfeatures array")
    num_classes: int | None = Field(default=None, ge=1, description="one-hot size (default: max label + 1)")
    max_particles: int | None = Field(default=None, ge=1, description="pad with zeros / truncate GRU_input")
    truncate: Literal["nearest", "farthest"] = Field(
        default="nearest", description="which particles max_particles keeps (by DeltaR to particle 0)"
    )
    hlf_output_col: str = "HLF_input"
    label_output_col: str = "encoded_label"
    gru_output_col: str = "GRU_input"
    keep_raw: bool = Field(
        default=True,
        description="keep hfeatures and lfeatures beside the features (false: about half the bytes downstream)",
    )


def _is_vector(data_type: DataType) -> bool:
    return data_type.typeName() == "udt" or type(data_type).__name__ == "VectorUDT"


def _hlf_statistics(df: DataFrame, hlf_col: str, label_col: str, size: int) -> dict[str, Any]:
    """Per-feature min and max, array sizes and label range, in one Spark aggregation."""
    from pyspark.sql import functions as F

    hlf = F.col(hlf_col)
    row = df.agg(
        *[F.min(F.get(hlf, i)).alias(f"min{i}") for i in range(size)],
        *[F.max(F.get(hlf, i)).alias(f"max{i}") for i in range(size)],
        F.min(F.size(hlf)).alias("min_size"),
        F.max(F.size(hlf)).alias("max_size"),
        F.min(F.col(label_col)).alias("min_label"),
        F.max(F.col(label_col)).alias("max_label"),
        F.count(F.lit(1)).alias("rows"),
        F.count(F.col(label_col)).alias("labelled"),
    ).first()
    assert row is not None
    return row.asDict()


def _checked_ranges(
    df: DataFrame, params: TopologyFeaturesParams, hlf_col: str, metrics: dict[str, Any] | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """The HLF's per-feature minimum and maximum (numpy) and the class count, from one pass over a
    checked input (the statistics go into ``metrics`` too)."""
    import numpy as np

    size = params.hlf_size
    stats = _hlf_statistics(df, hlf_col, params.label_col, size)
    if stats["rows"] == 0:
        raise StageFailedError("topology_features: the input is empty")
    if stats["min_size"] != size or stats["max_size"] != size:
        raise StageFailedError(
            f"topology_features: {params.hfeatures_col} must hold {size} values in every row,"
            f" found sizes {stats['min_size']}..{stats['max_size']} (set hlf_size)"
        )
    if stats["labelled"] != stats["rows"] or stats["min_label"] < 0 or stats["min_label"] != int(stats["min_label"]):
        raise StageFailedError(
            f"topology_features: {params.label_col} must be a non-negative integer class in every row"
        )
    num_classes = params.num_classes or int(stats["max_label"]) + 1
    if stats["max_label"] >= num_classes:
        raise StageFailedError(f"topology_features: label {stats['max_label']} does not fit num_classes={num_classes}")
    minimum = np.array([stats[f"min{i}"] for i in range(size)], dtype=np.float64)
    maximum = np.array([stats[f"max{i}"] for i in range(size)], dtype=np.float64)
    if metrics is not None:
        metrics.update(
            rows=int(stats["rows"]),
            num_classes=num_classes,
            hlf_min=minimum.tolist(),
            hlf_max=maximum.tolist(),
        )
    return minimum, maximum, num_classes


def _output_schema(df: DataFrame, params: TopologyFeaturesParams, hlf_col: str) -> tuple[list[str], StructType]:
    """The input columns kept and the output's schema: those, then the three new columns."""
    from pyspark.sql import types as T

    doubles = T.ArrayType(T.DoubleType(), containsNull=False)
    raw = {params.hfeatures_col, params.lfeatures_col, hlf_col}
    kept = [f.name for f in df.schema.fields if params.keep_raw or f.name not in raw]
    out_schema = T.StructType(
        [
            *[df.schema[name] for name in kept],
            T.StructField(params.hlf_output_col, doubles, nullable=False),
            T.StructField(params.label_output_col, doubles, nullable=False),
            T.StructField(params.gru_output_col, T.ArrayType(doubles, containsNull=False), nullable=False),
        ]
    )
    return kept, out_schema


def add_topology_features(
    df: DataFrame, params: TopologyFeaturesParams, metrics: dict[str, Any] | None = None
) -> DataFrame:
    """The seed's feature preparation on ``df``: three columns added, the input's kept (the raw ones
    only with ``keep_raw``)."""
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import functions as F

    from dagspec.kinds.physics.arrow import nested_matrix, nested_values, to_list, to_nested_list
    from dagspec.kinds.physics.topology import min_max_scale, one_hot, prepare_particles

    missing = [c for c in (params.hfeatures_col, params.lfeatures_col, params.label_col) if c not in df.columns]
    if missing:
        raise StageFailedError(f"topology_features: input has no column(s) {missing}; columns: {df.columns}")
    clashes = [c for c in (params.hlf_output_col, params.label_output_col, params.gru_output_col) if c in df.columns]
    if clashes:
        raise StageFailedError(f"topology_features: output column(s) {clashes} already exist in the input")
    hlf_col = params.hfeatures_col
    if _is_vector(df.schema[hlf_col].dataType):  # a Spark ML vector, as in the seed's Parquet files
        from pyspark.ml.functions import vector_to_array

        hlf_col = "__hfeatures_array"
        df = df.withColumn(hlf_col, vector_to_array(F.col(params.hfeatures_col)))
    size = params.hlf_size
    minimum, maximum, num_classes = _checked_ranges(df, params, hlf_col, metrics)
    kept, out_schema = _output_schema(df, params, hlf_col)
    names = [f.name for f in out_schema.fields]
    lf_col, label_col = params.lfeatures_col, params.label_col
    max_particles, keep = params.max_particles, params.truncate

    def transform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            hlf = nested_values(batch.column(hlf_col), size)
            labels = batch.column(label_col).to_numpy(zero_copy_only=False)
            offsets, particles = nested_matrix(batch.column(lf_col), N_FEATURES, lf_col)
            gru_offsets, gru = prepare_particles(offsets, particles, max_particles, keep)
            new = [
                to_list(min_max_scale(hlf, minimum, maximum)),
                to_list(one_hot(labels, num_classes)),
                to_nested_list(gru_offsets, gru),
            ]
            yield pa.RecordBatch.from_arrays([*(batch.column(name) for name in kept), *new], names=names)

    result = df.mapInArrow(transform, out_schema)
    if num_classes == len(CLASS_NAMES):  # the seed's classes: trainers' cards, evaluate and compare name them
        named = {CLASS_NAMES_KEY: list(CLASS_NAMES)}
        for column in (params.label_col, params.label_output_col):
            result = result.withMetadata(column, {**result.schema[column].metadata, **named})
    return result.drop(hlf_col) if hlf_col != params.hfeatures_col and params.keep_raw else result


@kind("topology_features", params=TopologyFeaturesParams, inputs={"data": TABLE})
def topology_features(inputs: Inputs, params: TopologyFeaturesParams, ctx: StageContext) -> Outputs:
    """Min-max scaled HLF, one-hot labels, particles sorted by DeltaR and standardized per event.

    HLF_input (min-max), encoded_label (one-hot), GRU_input (DeltaR-sorted, standardized).
    """
    df = inputs.table("data")
    return {"data": add_topology_features(df, params, ctx.metrics)}
