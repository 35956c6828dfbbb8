"""The inference flavors dagspec can apply, by the name ``model.json`` gives them.

The registry, like the kind catalog, is static: each flavor module is imported here by name, so
linters see it and the cache key sees it. A stage's code hash follows the imports of its kind
module transitively (``dagspec.plan.fingerprint.code_hashes``): predict and evaluate import
``models``, which imports this module, so the source of every flavor below is part of their
fingerprints. Adding a flavor is a module beside these (importing ``flavor_base``, never
``models``), a line here and its name in ``dagspec.kinds.model_card.Flavor``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from dagspec.errors import StageFailedError
from dagspec.kinds.scoring import flavor_keras, flavor_spark_ml, flavor_vw, flavor_xgboost

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagspec.kinds.scoring.flavor_base import Scoring


class FlavorModule(Protocol):
    """A flavor module: its ``transform`` (the contract is in ``dagspec.kinds.scoring.flavor_base``)."""

    def transform(self, scoring: Scoring) -> DataFrame: ...


FLAVORS: Mapping[str, FlavorModule] = {
    "keras": flavor_keras,
    "spark_ml": flavor_spark_ml,
    "xgboost": flavor_xgboost,
    "vw": flavor_vw,
}


def get_flavor(name: str) -> FlavorModule:
    """The flavor module called ``name`` (a model card is validated against the same names)."""
    if name not in FLAVORS:
        raise StageFailedError(f"model flavor {name!r} is not one of {', '.join(sorted(FLAVORS))}")
    return FLAVORS[name]
