"""Jinja in stage params: rendered in a sandbox, so a template can read values but not run code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

_JINJA = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


def is_templated(value: Any) -> bool:
    """True for a string that Jinja will render at run time."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def render(value: Any, context: Mapping[str, Any]) -> Any:
    """Render every Jinja string inside ``value``."""
    if isinstance(value, str):
        if not is_templated(value):
            return value
        return _JINJA.from_string(value).render(context)
    if isinstance(value, Mapping):
        return {k: render(v, context) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render(v, context) for v in value]
    return value
