"""The spec's JSON Schema (draft 2020-12), generated from the pydantic models that validate it.

Editors use it for completion, hover text (the fields' descriptions and defaults) and early
errors: ``dagspec schema`` prints it, ``docs/dagspec.schema.json`` is the committed copy the
shipped specs point to. A stage's ``params`` are selected by its ``kind`` (``if``/``then`` on the
kind's name) and take the kind's params model; any value inside ``params`` may also be a Jinja
template string, which only ``dagspec validate`` can check (it renders them).
"""

from __future__ import annotations

import json
from typing import Any

from dagspec.kinds.catalog import Catalog
from dagspec.spec.models import PipelineSpec

DRAFT = "https://json-schema.org/draft/2020-12/schema"
TEMPLATE = "template"  # the $defs entry of a Jinja string
_TEMPLATE_SCHEMA = {
    "type": "string",
    "pattern": r"\{\{|\{%",
    "description": "a Jinja template, rendered when the stage runs ({{ params.NAME }}, {{ matrix.NAME }}, {{ ds }})",
}
_HOISTED = ("title", "description", "default")


def spec_schema(catalog: Catalog) -> dict[str, Any]:
    """The JSON Schema of a spec file with every kind of ``catalog``."""
    schema = PipelineSpec.model_json_schema(mode="validation")
    schema["properties"].pop("source", None)  # filled in by the loader, not written
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    defs[TEMPLATE] = _TEMPLATE_SCHEMA
    stage = defs["StageSpec"]
    names = sorted({*catalog.names(), *catalog.aliases})
    stage["properties"]["kind"] = {**stage["properties"]["kind"], "enum": names}
    branches = []
    for name in names:
        kind = catalog.get(name)
        assert kind is not None
        key = f"kind.{kind.name}"
        if key not in defs:
            params = kind.params.model_json_schema(mode="validation", ref_template=f"#/$defs/{key}.{{model}}")
            for inner, definition in params.pop("$defs", {}).items():
                defs[f"{key}.{inner}"] = _templates_allowed(definition)
            defs[key] = _templates_allowed(params)
        branches.append(
            {
                "if": {"properties": {"kind": {"const": name}}, "required": ["kind"]},
                "then": {
                    "properties": {"params": {"$ref": f"#/$defs/{key}", "description": f"{name}: {kind.description}"}}
                },
            }
        )
    stage["allOf"] = branches
    return {
        "$schema": DRAFT,
        "title": "dagspec pipeline spec",
        "description": "A pipeline: params, Spark settings and stages (one Airflow task each); see docs/spec.md",
        **schema,
    }


def schema_text(catalog: Catalog) -> str:
    """The schema as the committed file holds it (sorted keys, two-space indent, final newline)."""
    return json.dumps(spec_schema(catalog), indent=2, sort_keys=True) + "\n"


def _templates_allowed(schema: dict[str, Any]) -> dict[str, Any]:
    """Every value under an object or array of ``schema`` may also be a template string."""
    result = dict(schema)
    if isinstance(result.get("properties"), dict):
        result["properties"] = {k: _or_template(v) for k, v in result["properties"].items()}
    for key in ("additionalProperties", "items"):
        if isinstance(result.get(key), dict):
            result[key] = _or_template(result[key])
    if isinstance(result.get("prefixItems"), list):
        result["prefixItems"] = [_or_template(v) for v in result["prefixItems"]]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(result.get(key), list):
            result[key] = [_templates_allowed(v) for v in result[key]]
    return result


def _or_template(schema: dict[str, Any]) -> dict[str, Any]:
    inner = _templates_allowed({k: v for k, v in schema.items() if k not in _HOISTED})
    hoisted = {k: schema[k] for k in _HOISTED if k in schema}
    return {**hoisted, "anyOf": [inner, {"$ref": f"#/$defs/{TEMPLATE}"}]}
