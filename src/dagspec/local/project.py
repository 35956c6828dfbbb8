"""What the CLI's verbs share: finding and loading the project's specs, parsing ``-p name=value``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from dagspec.errors import DagspecError
from dagspec.spec.loader import load_spec, pipelines_dir, spec_files
from dagspec.spec.models import FORCE_PARAM, PipelineSpec


def display(path: Path, home: Path) -> str:
    """A path as the user should read it: relative to the project when inside it."""
    path = path.resolve()
    return os.path.relpath(path, home) if path.is_relative_to(home) else str(path)


def spec_paths(paths: Sequence[str], home: Path) -> list[Path]:
    """The spec files named (files or folders), or every spec of the pipelines folder."""
    if not paths:
        return spec_files(pipelines_dir(home))
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        found.extend(spec_files(path) if path.is_dir() else [path])
    return found


def load(path: Path, home: Path) -> PipelineSpec:
    """Load one spec, naming it relative to the project in errors."""
    if not path.exists():
        raise DagspecError(f"{path}: no such spec file")
    return load_spec(path, display(path, home))


def parse_overrides(pairs: Sequence[str], spec: PipelineSpec) -> dict[str, Any]:
    """``-p name=value`` pairs as run params (strings stay strings; others are parsed as YAML)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise DagspecError(f"-p expects name=value, got {pair!r}")
        if name not in spec.params and name != FORCE_PARAM:
            known = ", ".join(spec.params) or "none"
            raise DagspecError(f"unknown param {name!r} for {spec.dag_id}; params: {known}")
        param = spec.params.get(name)
        overrides[name] = raw if param is not None and param.type == "string" else yaml.safe_load(raw)
    return overrides


def absolute_root(root: str | None) -> str | None:
    """A --storage-root made absolute (URIs unchanged)."""
    if root is None or "://" in root:
        return root
    return str(Path(root).resolve())
