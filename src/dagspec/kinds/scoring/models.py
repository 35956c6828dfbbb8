"""Load any saved model and apply it to a DataFrame: the one entry point of predict and evaluate.

A helper of the scoring kinds, imported inside their functions (it imports pyspark). The flavor
of a model (``model.json``'s ``flavor``) selects its module in the registry
``dagspec.kinds.scoring.flavors``; the contract each flavor keeps is in
``dagspec.kinds.scoring.flavor_base``, and ``transform_with_model`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DoubleType, IntegerType

from dagspec.errors import StageFailedError
from dagspec.kinds.model_card import ModelCard, read_model_card
from dagspec.kinds.scoring.flavor_base import PREDICTION, PROBABILITY, Scoring, local_path
from dagspec.kinds.scoring.flavors import get_flavor


def read_card(model_dir: str) -> ModelCard:
    """``model.json`` of a model directory (a local path or a ``file://`` URI), as its ``ModelCard``."""
    return read_model_card(local_path(model_dir), shown_as=model_dir)


def transform_with_model(
    spark: SparkSession,
    model_dir: str,
    df: DataFrame,
    keep_cols: Sequence[str],
    *,
    batch_size: int | None = None,
    min_rows_per_task: int | None = None,
) -> DataFrame:
    """``keep_cols`` + ``probability`` + ``prediction`` for every row of ``df`` (lazy).

    ``min_rows_per_task``: fewer tasks for a small ``df`` (see ``coalesce_small``).
    """
    card = read_card(model_dir)
    keep = list(dict.fromkeys(keep_cols))
    clashes = [c for c in keep if c in (PROBABILITY, PREDICTION)]
    if clashes:
        raise StageFailedError(f"cannot keep columns named {clashes}: the model writes them")
    missing = [c for c in keep if c not in df.columns]
    if missing:
        raise StageFailedError(f"columns {missing} are not in the data; columns: {', '.join(df.columns)}")
    if min_rows_per_task is not None:
        df = coalesce_small(df, min_rows_per_task)
    result = get_flavor(card.flavor).transform(Scoring(spark, model_dir, card, df, keep, batch_size))
    _check_contract(card.flavor, result, df, keep, len(card.classes))
    return result


def coalesce_small(df: DataFrame, min_rows_per_task: int) -> DataFrame:
    """``df`` in fewer partitions when it has fewer than ``min_rows_per_task`` rows per partition.

    Every inference task starts a Python worker that imports the model's library and loads the
    model (TensorFlow: seconds of CPU each). For a test set of a few hundred rows spread over the
    files of a Parquet checkpoint that start-up is the whole cost, so small inputs are scored by
    fewer tasks. Costs one ``count`` (Parquet answers it from the footers).
    """
    rows = df.count()
    return df.coalesce(max(1, -(-rows // min_rows_per_task)))  # coalesce never adds partitions


def _check_contract(flavor: str, result: DataFrame, df: DataFrame, keep: list[str], n_classes: int) -> None:
    expected = [*keep, PROBABILITY, PREDICTION]
    if result.columns != expected:
        raise StageFailedError(f"flavor {flavor!r} returned columns {result.columns}, expected {expected}")
    fields = {f.name: f.dataType for f in result.schema.fields}
    if fields[PROBABILITY] != ArrayType(DoubleType(), True) and fields[PROBABILITY] != ArrayType(DoubleType(), False):
        raise StageFailedError(f"flavor {flavor!r}: probability is {fields[PROBABILITY].simpleString()}")
    if fields[PREDICTION] != IntegerType():
        raise StageFailedError(f"flavor {flavor!r}: prediction is {fields[PREDICTION].simpleString()}, not int")
    changed = [c for c in keep if fields[c] != df.schema[c].dataType]
    if changed:
        raise StageFailedError(f"flavor {flavor!r} changed the types of kept columns {changed}")
