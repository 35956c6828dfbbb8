"""Class names carried by a label column's Spark metadata (``{"class_names": [...]}``).

A stage that knows its classes by name (``topology_features``: QCD, tt, W+jets) sets them on its
label columns; Spark keeps column metadata through Parquet, filters and selects, and a trainer
copies them into its model card. Apart from the model card so that a feature stage's fingerprint
does not follow the card's code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CLASS_NAMES_KEY = "class_names"  # in a label column's Spark metadata


def label_class_names(metadata: Mapping[str, Any]) -> list[str] | None:
    """The class names a label column's metadata carries (``{"class_names": [...]}``), else None."""
    names = metadata.get(CLASS_NAMES_KEY)
    return [str(n) for n in names] if isinstance(names, list) and names else None
