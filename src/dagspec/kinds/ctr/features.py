"""Kind ``ctr_features``: Criteo columns -> hashed sparse features, or numeric columns for trees."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.ctr.columns import CRITEO_CATEGORICAL_COLUMNS, CRITEO_INTEGER_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class CtrFeaturesParams(StageParams):
    """Criteo columns -> model features.

    ``hashed``: a ``features`` SparseVector of 2^hash_bits dims (integers as values, categoricals as
    ``Cj=value`` tokens) + ``label``. ``as_is``: label, I1..I13 (long, nulls kept), C1..C26 parsed
    from hex to 32-bit ints (nulls kept), for tree models.
    """

    mode: Literal["hashed", "as_is"]
    hash_bits: int = Field(default=17, ge=4, le=28)
    log1p: bool = Field(default=False, description="hashed: log1p(x) for positive integer values")
    label_col: str = "label"
    features_col: str = "features"
    keep_cols: list[str] = Field(default_factory=list, description="extra input columns carried through")


@kind("ctr_features", params=CtrFeaturesParams, inputs={"data": TABLE})
def ctr_features(inputs: Inputs, params: CtrFeaturesParams, ctx: StageContext) -> Outputs:
    """Criteo rows -> hashed SparseVector features, or the 39 columns as numbers for trees.

    Checks the columns, then ``hashed_features`` or ``as_is_features``.
    """
    df = inputs.table("data")
    needed = [params.label_col, *CRITEO_INTEGER_COLUMNS, *CRITEO_CATEGORICAL_COLUMNS, *params.keep_cols]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise StageFailedError(f"ctr_features needs the Criteo columns; missing {missing} (have {df.columns})")
    if params.mode == "hashed":
        ctx.metrics["num_features"] = 2**params.hash_bits
        return {"data": hashed_features(df, params)}
    return {"data": as_is_features(df, params)}


def hashed_features(df: DataFrame, params: CtrFeaturesParams) -> DataFrame:
    """Spark's FeatureHasher (MurmurHash3): a numeric column is hashed by its name and contributes
    its value; a string column contributes the token ``Cj=value`` with weight 1. Nulls contribute
    nothing (a missing value is an absent feature, as in the benchmark's VW/LibSVM files).
    """
    from pyspark.ml.feature import FeatureHasher
    from pyspark.sql import functions as F

    def integer(name: str) -> Column:
        value = F.col(name).cast("double")
        if params.log1p:
            # positives compress their heavy tail; zero and negatives (I2 has -1..-3) stay as they are
            return F.when(value > 0, F.log1p(value)).otherwise(value).alias(name)
        return value.alias(name)

    def categorical(name: str) -> Column:
        # as_is-style int categoricals hash the same way as hex strings would not: keep one token space
        return F.col(name).cast("string").alias(name)

    prepared = df.select(
        F.col(params.label_col).cast("int").alias("label"),
        *[integer(c) for c in CRITEO_INTEGER_COLUMNS],
        *[categorical(c) for c in CRITEO_CATEGORICAL_COLUMNS],
        *params.keep_cols,
    )
    hasher = FeatureHasher(
        inputCols=[*CRITEO_INTEGER_COLUMNS, *CRITEO_CATEGORICAL_COLUMNS],
        outputCol=params.features_col,
        numFeatures=2**params.hash_bits,
        categoricalCols=CRITEO_CATEGORICAL_COLUMNS,
    )
    return hasher.transform(prepared).select("label", params.features_col, *params.keep_cols)


def as_is_features(df: DataFrame, params: CtrFeaturesParams) -> DataFrame:
    """label, I1..I13 as longs, C1..C26 as 32-bit ints (hex parsed, two's complement); nulls stay null."""
    from pyspark.sql import functions as F

    def categorical(name: str) -> Column:
        if dict(df.dtypes)[name] in ("int", "bigint"):
            return F.col(name).cast("int").alias(name)
        value = F.trim(F.col(name))
        as_long = F.conv(value, 16, 10).try_cast("long")
        # 1 to 8 hex digits: unhex is null for any other character (and costs a tenth of a regex)
        valid = F.octet_length(value).between(1, 8) & F.unhex(value).isNotNull()
        # two's complement by flipping bit 31 (x ^ 2^31 - 2^31): one reference to the parsed value. Spark
        # does not share a subexpression inside a conditional branch, and `when(x >= 2^31, x - 2^32)
        # .otherwise(x)` under `when(valid, ...)` parsed every value twice: 14.3 s of JVM CPU against
        # 9.4 s for the projection of 10^6 rows (bench/RESULTS.md)
        signed = as_long.bitwiseXOR(F.lit(2**31)) - F.lit(2**31)
        return F.when(valid, signed.cast("int")).alias(name)

    return df.select(
        F.col(params.label_col).cast("int").alias("label"),
        *[F.col(c).cast("long").alias(c) for c in CRITEO_INTEGER_COLUMNS],
        *[categorical(c) for c in CRITEO_CATEGORICAL_COLUMNS],
        *params.keep_cols,
    )
