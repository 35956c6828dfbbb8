"""Arrow batches -> Vowpal Wabbit example lines, the same for ``train_vw`` and the ``vw`` flavor.

A line is ``<label> |<namespace> <feature> ... |<namespace> ...``: a numeric column contributes
``<column>:<value>`` (``log1p`` of positive values when its namespace says so), a categorical column
the token ``<column>_<value>`` with VW's default weight 1; VW hashes every feature name into its
``2^bits`` weights itself. A missing (null or empty) value adds no feature, as in the benchmark's VW
files. The label is ``1`` for a click and ``-1`` otherwise (VW's logistic loss); scoring lines have
none. Lines are built with Arrow compute kernels, never a Python loop over values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from dagspec.errors import StageFailedError

if TYPE_CHECKING:
    from dagspec.kinds.model_card import VWNamespace

# characters that end a feature name or a namespace in VW's text format
_SEPARATORS = r"[\s|:]"


def namespace_columns(namespaces: Sequence[VWNamespace]) -> list[str]:
    """Every column the namespaces read, each once, in namespace order."""
    return list(dict.fromkeys(column for namespace in namespaces for column in namespace.columns))


def check_namespaces(namespaces: Sequence[VWNamespace], schema: pa.Schema, label_col: str | None) -> None:
    """Fail with what is wrong when a namespace names a missing column or a numeric one holds text."""
    firsts = [n.name[0] for n in namespaces]
    clashes = sorted({f for f in firsts if firsts.count(f) > 1})
    if clashes:
        raise StageFailedError(
            f"vw namespaces must start with distinct letters (VW's interactions name them by it): {clashes} repeat"
        )
    missing = [c for c in namespace_columns(namespaces) if c not in schema.names]
    if missing:
        raise StageFailedError(f"vw namespaces read columns {missing} that the data lacks (columns: {schema.names})")
    if label_col is not None and label_col in namespace_columns(namespaces):
        raise StageFailedError(f"the label column {label_col!r} cannot be a feature of a vw namespace")
    for namespace in namespaces:
        if namespace.values != "numeric":
            continue
        text = [c for c in namespace.columns if not _is_number(schema.field(c).type)]
        if text:
            raise StageFailedError(
                f"vw namespace {namespace.name!r} is numeric but columns {text} are not numbers;"
                " make it values: categorical"
            )


def _is_number(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type))


def example_lines(
    batch: pa.RecordBatch | pa.Table, namespaces: Sequence[VWNamespace], label_col: str | None = None
) -> list[str]:
    """The VW text line of every row of ``batch`` (with its label when ``label_col`` is given)."""
    parts: list[pa.Array | pa.ChunkedArray | str] = []
    if label_col is not None:
        parts.append(pc.if_else(pc.greater(batch.column(label_col), 0), "1", "-1"))
    for namespace in namespaces:
        parts.append(f"|{namespace.name}")
        for column in namespace.columns:
            parts.append(_feature(batch.column(column), column, namespace))
    # the last argument is the separator; a null (missing) feature is skipped
    lines = pc.binary_join_element_wise(*parts, " ", null_handling="skip")
    return lines.to_pylist()  # type: ignore[no-any-return]


def _feature(values: pa.Array | pa.ChunkedArray, column: str, namespace: VWNamespace) -> pa.Array | pa.ChunkedArray:
    """One column's feature per row (null where the value is missing)."""
    if namespace.values == "numeric":
        number = pc.cast(values, pa.float64())
        if namespace.log1p:
            number = pc.if_else(pc.greater(number, 0), pc.log1p(number), number)
        return pc.binary_join_element_wise(f"{column}:", pc.cast(number, pa.string()), "")
    text = pc.replace_substring_regex(pc.cast(values, pa.string()), _SEPARATORS, "_")
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
    return pc.binary_join_element_wise(f"{column}_", text, "")
