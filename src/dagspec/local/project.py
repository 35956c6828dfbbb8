"""What the CLI's verbs share: finding and loading the project's specs, parsing ``-p name=value``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from dagspec.errors import DagspecError, SpecValidationError
from dagspec.spec.loader import SPEC_SUFFIXES, load_spec, pipelines_dir, spec_files
from dagspec.spec.models import FORCE_PARAM, PipelineSpec
from dagspec.spec.params import run_param_value
from dagspec.spec.together import LoadedSpec, claims_of, load_specs, shared_dag_id_issues


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


def load_together(paths: Sequence[Path], home: Path, *, with_folders: bool = False) -> list[LoadedSpec]:
    """Load specs read together: a ``dag_id`` two of them share is an error of both.

    ``with_folders``: the other specs of each file's folder count too (the folder Airflow
    parses with it, see ``require_own_dag_id``).
    """
    for path in paths:
        if not path.exists():
            raise DagspecError(f"{path}: no such spec file")
    neighbours = sorted({p for path in paths for p in spec_files(path.parent)}) if with_folders else []
    return load_specs(paths, lambda path: display(path, home), neighbours=neighbours)


def require_own_dag_id(path: Path, home: Path) -> None:
    """Refuse a spec that the DAG file would not compile into its own DAG.

    ``dagspec run`` points the DAG file at the spec's folder; the DAG file compiles the
    ``*.yaml``/``*.yml`` files there, and a ``dag_id`` two of them share compiles into no DAG.
    """
    if path.suffix not in SPEC_SUFFIXES:
        raise DagspecError(
            f"{display(path, home)}: the DAG file compiles only {' and '.join(SPEC_SUFFIXES)} files; rename it"
        )
    folder = [p for p in spec_files(path.parent) if p.resolve() != path.resolve()]
    issues = shared_dag_id_issues(claims_of([path, *folder], lambda p: display(p, home))).get(path.resolve())
    if issues:
        raise SpecValidationError(issues)


def parse_overrides(pairs: Sequence[str], spec: PipelineSpec) -> dict[str, Any]:
    """``-p name=value`` pairs as run params, each checked against its declaration (``run_param_value``)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise DagspecError(f"-p expects name=value, got {pair!r}")
        overrides[name] = yaml.safe_load(raw) if name == FORCE_PARAM else run_param_value(spec, name, raw)
    return overrides


def absolute_root(root: str | None) -> str | None:
    """A --storage-root made absolute (URIs unchanged)."""
    if root is None or "://" in root:
        return root
    return str(Path(root).resolve())
