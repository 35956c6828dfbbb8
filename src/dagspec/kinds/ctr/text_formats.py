"""Interop text formats of the Criteo benchmark: LibSVM and Vowpal Wabbit (used by ``export``).

Both are written by Spark into the directory ``export`` then swaps into place, so the export is
atomic. LibSVM: ``label idx:val ...`` with 1-based ascending indices, from a ``features`` vector.
VW: ``1 |`` / ``-1 |`` lines; from the Criteo columns (raw or as_is) with the namespaces ``i``
(integers as ``I3:value``) and ``c`` (categoricals as ``C7_value`` tokens), else from a
``features`` vector as ``|f idx:val`` (1-based, the same indices as LibSVM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagspec import storage
from dagspec.errors import StageFailedError
from dagspec.kinds.ctr.columns import CRITEO_CATEGORICAL_COLUMNS, CRITEO_INTEGER_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def write_text_format(
    df: DataFrame, path: str, fmt: str, label_col: str = "label", features_col: str = "features"
) -> None:
    """Write ``df`` as LibSVM (``fmt='libsvm'``) or VW (``fmt='vw'``) text files under ``path``."""
    from pyspark.sql import functions as F

    if label_col not in df.columns:
        raise StageFailedError(f"export {fmt}: no label column {label_col!r} (have {df.columns})")
    criteo = all(c in df.columns for c in (*CRITEO_INTEGER_COLUMNS, *CRITEO_CATEGORICAL_COLUMNS))
    if fmt == "vw" and criteo:
        vw_label = F.when(F.col(label_col) > 0, F.lit("1")).otherwise(F.lit("-1"))
        ints = [
            F.when(F.col(c).isNotNull(), F.concat(F.lit(f"{c}:"), F.col(c).cast("string")))
            for c in CRITEO_INTEGER_COLUMNS
        ]
        cats = [
            F.when(F.col(c).isNotNull(), F.concat(F.lit(f"{c}_"), F.col(c).cast("string")))
            for c in CRITEO_CATEGORICAL_COLUMNS
        ]
        # concat_ws skips nulls: a missing value is an absent feature
        line = F.concat_ws(" ", vw_label, F.lit("|i"), *ints, F.lit("|c"), *cats)
        df.select(line.alias("value")).write.mode("error").text(path)
        return
    if features_col not in df.columns:
        raise StageFailedError(
            f"export {fmt}: needs a {features_col!r} vector column (ctr_features mode hashed)"
            + (" or the Criteo columns" if fmt == "vw" else "")
        )
    data = df.select(F.col(label_col).cast("double").alias("label"), F.col(features_col).alias("features"))
    if fmt == "libsvm":
        data.write.mode("error").format("libsvm").save(path)
        return
    # VW from a vector: Spark's own LibSVM serialisation (no Python), then relabel in SQL
    spark = df.sparkSession
    tmp = f"{path.rstrip('/')}.__libsvm"
    data.write.mode("error").format("libsvm").save(tmp)
    text = spark.read.text(tmp)
    label, _, rest = F.split_part(F.col("value"), F.lit(" "), F.lit(1)), None, F.regexp_replace("value", r"^\S+\s?", "")
    vw = F.concat(F.when(label.cast("double") > 0, F.lit("1")).otherwise(F.lit("-1")), F.lit(" |f "), rest)
    text.select(vw.alias("value")).write.mode("error").text(path)
    storage.delete(tmp)
