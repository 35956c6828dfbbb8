"""Label columns checked before use: one Spark aggregation, a clear message with the counts.

Samplers, trainers and ``evaluate`` call ``require_labels`` (or count nulls in the aggregate they
already compute), so a null or unexpected label fails the stage with how many rows are wrong and
an example, instead of a TypeError deep in a library.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dagspec.errors import StageFailedError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _hint(label_col: str, classes: Sequence[int]) -> str:
    values = ", ".join(str(c) for c in classes)
    return (
        f"; drop or fix those rows upstream (a check stage catches them at the source: "
        f"columns: {{{label_col}: {{not_null: true, in: [{values}]}}}})"
    )


def null_label_message(who: str, nulls: int, rows: int, label_col: str) -> str:
    """The one-line failure for null labels found by a kind's own aggregation."""
    return (
        f"{who}: {nulls} of {rows} rows have a null label in {label_col!r}; drop or fill them upstream "
        f"(a check stage catches them at the source: columns: {{{label_col}: {{not_null: true}}}})"
    )


def class_counts(df: DataFrame, label_col: str, who: str) -> dict[str, int]:
    """Rows per class value (as a string), from one grouped count; a missing column or a null label fails."""
    if label_col not in df.columns:
        raise StageFailedError(f"{who}: no label column {label_col!r} (columns: {', '.join(df.columns)})")
    from pyspark.sql import functions as F

    # keyed by Spark's own string cast, as the samplers group their rows (Python's str() of a boolean
    # is "True", Spark's "true": the quotas would name no class of the data)
    key = F.col(f"`{label_col}`").cast("string").alias("class")
    rows = [(row[0], int(row[1])) for row in df.groupBy(key).count().collect()]
    nulls = sum(n for value, n in rows if value is None)
    if nulls:
        raise StageFailedError(null_label_message(who, nulls, sum(n for _, n in rows), label_col))
    return {str(value): n for value, n in rows}


def require_classes(counts: dict[str, int], label_col: str, classes: Sequence[int], who: str) -> None:
    """Fail unless every class of ``counts`` (from ``class_counts``) is one of ``classes``, compared as numbers."""
    allowed = {float(c) for c in classes}

    def is_class(value: str) -> bool:
        try:
            return float(value) in allowed
        except ValueError:
            return False

    wrong = {value: n for value, n in counts.items() if not is_class(value)}
    if wrong:
        examples = ", ".join(sorted(wrong)[:3])
        raise StageFailedError(
            f"{who}: {sum(wrong.values())} of {sum(counts.values())} rows have a label in {label_col!r} that is not "
            f"one of {list(classes)} (e.g. {examples})" + _hint(label_col, classes)
        )


def require_labels(
    df: DataFrame,
    label_col: str,
    classes: Sequence[int],
    *,
    who: str,
    role: str = "",
    one_hot_size: int | None = None,
) -> int:
    """Fail unless every label is one of ``classes``; returns the number of rows.

    Numeric labels must equal a class exactly (1.5 and NaN are not classes); array or vector
    labels (one-hot) must have ``one_hot_size`` (default: the number of classes) entries, each 0
    or 1, summing to 1. Nothing but the counts and two example values reaches the driver.
    """
    from pyspark.ml.functions import vector_to_array
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, NumericType

    where = f" of {role!r}" if role else ""
    if label_col not in df.columns:
        raise StageFailedError(f"{who}: no label column {label_col!r} in the data{where} (columns: {df.columns})")
    data_type = df.schema[label_col].dataType
    label = F.col(f"`{label_col}`")
    if isinstance(data_type, VectorUDT | ArrayType):
        size = one_hot_size or len(classes)
        values = vector_to_array(label) if isinstance(data_type, VectorUDT) else label
        binary = F.forall(values, lambda x: x.isNotNull() & ((x == 0) | (x == 1)))
        total = F.aggregate(values, F.lit(0.0), lambda acc, x: acc + F.coalesce(x.cast("double"), F.lit(0.0)))
        wrong = label.isNotNull() & ~(F.coalesce((F.size(values) == size) & binary & (total == 1), F.lit(False)))
        shown = F.to_json(values)
        expected = f"a one-hot vector of {size} entries"
    elif isinstance(data_type, NumericType):
        as_double = label.cast("double")
        valid = as_double.isin([float(c) for c in classes]) & ~F.isnan(as_double)
        wrong = label.isNotNull() & ~F.coalesce(valid, F.lit(False))
        shown = label.cast("string")
        expected = f"one of {list(classes)}"
    else:
        raise StageFailedError(
            f"{who}: label column {label_col!r}{where} is {data_type.simpleString()}; expected numeric class "
            f"values {list(classes)} or one-hot vectors"
        )
    row = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count_if(label.isNull()).alias("nulls"),
        F.count_if(wrong).alias("wrong"),
        F.min(F.when(wrong, shown)).alias("low"),
        F.max(F.when(wrong, shown)).alias("high"),
    ).first()
    assert row is not None
    rows, nulls, wrong_n = int(row["rows"]), int(row["nulls"] or 0), int(row["wrong"] or 0)
    if not nulls and not wrong_n:
        return rows
    problems = []
    if nulls:
        problems.append(f"{nulls} of {rows} rows{where} have a null label in {label_col!r}")
    if wrong_n:
        examples = sorted({str(row["low"]), str(row["high"])})
        problems.append(
            f"{wrong_n} of {rows} rows{where} have a label in {label_col!r} that is not {expected} "
            f"(e.g. {', '.join(examples)})"
        )
    raise StageFailedError(f"{who}: " + "; ".join(problems) + _hint(label_col, classes))
