"""Validation of OpenLineage events against the spec's own JSON schemas (vendored in ``openlineage_spec/``).

An event is validated against the schema its ``schemaURL`` names, and every facet in it against the
schema its ``_schemaURL`` names: the core schema alone accepts any facet that has ``_producer`` and
``_schemaURL``, so a facet's own fields are only checked by its facet schema. A URL that names no
schema known here (the spec's files and dagspec's own facet schemas under ``docs/openlineage/``) is
an error, not a pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.conftest import REPO

SPEC_DIR = Path(__file__).parent / "openlineage_spec"
OWN_DIR = REPO / "docs" / "openlineage"


def _registry() -> Registry:
    files = [
        SPEC_DIR / "OpenLineage.json",
        *sorted((SPEC_DIR / "facets").glob("*.json")),
        *sorted(OWN_DIR.glob("*.json")),
    ]
    documents = [json.loads(path.read_text()) for path in files]
    return Registry().with_resources((doc["$id"], Resource.from_contents(doc)) for doc in documents)  # type: ignore[arg-type]


REGISTRY = _registry()


def schema_errors(instance: Any, url: str) -> list[str]:
    """What is wrong with ``instance`` under the schema at ``url`` (``<$id>#<pointer>``)."""
    document = url.partition("#")[0]
    if document not in REGISTRY:
        return [f"{url}: no such schema here (vendor it from the OpenLineage spec)"]
    validator = Draft202012Validator({"$ref": url}, registry=REGISTRY)
    return [f"{url}: {error.json_path}: {error.message}" for error in validator.iter_errors(instance)]


def facet_groups(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, facets) of every facet map of a run event."""
    yield "run", event["run"].get("facets") or {}
    yield "job", event["job"].get("facets") or {}
    for side in ("inputs", "outputs"):
        for dataset in event.get(side) or []:
            for group in ("facets", "inputFacets", "outputFacets"):
                yield f"{side}[{dataset['name']}].{group}", dataset.get(group) or {}


def event_errors(event: dict[str, Any]) -> list[str]:
    """Every schema violation of one event: the event's own, then each facet's."""
    errors = schema_errors(event, event["schemaURL"])
    for where, facets in facet_groups(event):
        for name, facet in facets.items():
            errors += [f"{where}.{name}: {e}" for e in schema_errors(facet, facet["_schemaURL"])]
    return errors
