"""The stage-kind registry: a kind is a params model, a function reference and a version.

Params models live in ``dagspec.kinds`` and import only pydantic, so the compiler can validate a
spec without Spark. The function is named by import path and resolved only inside the Spark job.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict


class StageParams(BaseModel):
    """Base of every kind's params model: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class IOType(StrEnum):
    """What travels along an edge: a Parquet table or a directory of files (a model, plots)."""

    TABLE = "table"
    FILES = "files"


@dataclass(frozen=True)
class InputRole:
    """One named input of a kind."""

    type: IOType = IOType.TABLE
    required: bool = True


@dataclass(frozen=True)
class KindDef:
    """Everything dagspec knows about a stage kind.

    ``outputs`` maps output names to their type; when the names depend on params (``split``), set
    ``outputs_from_params`` instead. The first output is the default one (``stage`` alone refers to
    it). ``any_inputs`` lets a kind take arbitrary roles (``sql``); ``any_inputs_type``, when set,
    is the type every such role must have (``compare`` reads only files outputs).
    """

    name: str
    params: type[StageParams]
    function: str
    version: str
    description: str
    inputs: Mapping[str, InputRole] = field(default_factory=dict)
    outputs: Mapping[str, IOType] = field(default_factory=lambda: {"data": IOType.TABLE})
    outputs_from_params: Callable[[Any], Mapping[str, IOType]] | None = None
    any_inputs: bool = False
    any_inputs_type: IOType | None = None

    def output_types(self, params: StageParams | None) -> Mapping[str, IOType]:
        """Output names and types for these params (None: params not known until run time)."""
        if self.outputs_from_params is not None and params is not None:
            return self.outputs_from_params(params)
        return self.outputs

    def load_function(self) -> Callable[..., Any]:
        """Import the stage function (pulls in pyspark: call it only inside a job)."""
        module_name, _, attr = self.function.partition(":")
        return getattr(importlib.import_module(module_name), attr)


_KINDS: dict[str, KindDef] = {}
_ALIASES: dict[str, str] = {}


def register(kind: KindDef, *, aliases: tuple[str, ...] = ()) -> KindDef:
    """Add a kind to the registry (at import time of its ``dagspec.kinds`` module)."""
    if kind.name in _KINDS:
        raise ValueError(f"stage kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind
    for alias in aliases:
        _ALIASES[alias] = kind.name
    return kind


def _ensure_loaded() -> None:
    importlib.import_module("dagspec.kinds")


def get_kind(name: str) -> KindDef | None:
    """The kind registered under ``name`` or one of its aliases."""
    _ensure_loaded()
    return _KINDS.get(_ALIASES.get(name, name))


def kind_names() -> list[str]:
    """Sorted names of every registered kind."""
    _ensure_loaded()
    return sorted(_KINDS)


def all_kinds() -> list[KindDef]:
    """Every registered kind, sorted by name."""
    _ensure_loaded()
    return [_KINDS[n] for n in sorted(_KINDS)]


def suggest(name: str, candidates: list[str]) -> str:
    """A ' (did you mean ...?)' hint, or ''."""
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
