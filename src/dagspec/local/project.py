"""What the CLI's verbs share: finding and loading the project's specs, parsing ``-p name=value``."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from dagspec.errors import DagspecError
from dagspec.spec.loader import SPEC_SUFFIXES, load_spec, pipelines_dir, spec_files
from dagspec.spec.models import FORCE_PARAM, PipelineSpec
from dagspec.spec.params import run_param_value
from dagspec.spec.partitions import PARTITIONS_PARAM
from dagspec.spec.together import LoadedSpec, load_specs


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
    parses with it, see ``require_own_dag``).
    """
    for path in paths:
        if not path.exists():
            raise DagspecError(f"{path}: no such spec file")
    neighbours = sorted({p for path in paths for p in spec_files(path.parent)}) if with_folders else []
    return load_specs(paths, lambda path: display(path, home), neighbours=neighbours, home=home)


def require_own_dag(path: Path, home: Path) -> None:
    """Refuse a spec that the DAG file would not compile into its own DAG.

    ``dagspec run`` points the DAG file at the spec's folder; the DAG file compiles the
    ``*.yaml``/``*.yml`` files there together, and a spec whose ``dag_id`` or export folder another
    of them has too (or whose asset schedule names no output of theirs) compiles into no DAG.
    """
    if path.suffix not in SPEC_SUFFIXES:
        raise DagspecError(
            f"{display(path, home)}: the DAG file compiles only {' and '.join(SPEC_SUFFIXES)} files; rename it"
        )
    (loaded,) = load_together([path], home, with_folders=True)
    if loaded.error is not None:
        raise loaded.error


def dag_files(home: Path) -> list[Path]:
    """The DAG files of ``home/dags`` that compile dagspec specs: Python files naming ``dagspec`` and
    ``airflow`` (Airflow's safe mode skips a file that never says ``airflow``)."""
    found = []
    for path in sorted((home / "dags").rglob("*.py")) if (home / "dags").is_dir() else []:
        try:
            text = path.read_bytes().lower()
        except OSError:
            continue
        if b"dagspec" in text and b"airflow" in text:
            found.append(path)
    return found


def require_project(home: Path, spec: Path) -> None:
    """Refuse to run outside a dagspec project, before anything starts.

    ``dagspec run`` runs the DAG that Airflow compiles from ``<home>/dags``: without a DAG file
    there that compiles the specs, ``airflow dags test`` finds no DAG. The message names the folder
    looked in, why it is no project, and the project above the spec when there is one.
    """
    if dag_files(home):
        return
    from_env = bool(os.environ.get("DAGSPEC_HOME"))
    if not (home / "dags").is_dir():
        missing = "no dags/ folder" + ("" if (home / "pipelines").is_dir() else " (and no pipelines/ folder)")
    else:
        missing = "no DAG file in dags/ that compiles the specs (a .py file importing dagspec)"
    project = next((folder for folder in spec.resolve().parents if dag_files(folder)), None)
    if project is not None:
        holds = f"the project holding {display(spec, project)}"
        todo = (
            f"set DAGSPEC_HOME={project} ({holds})"
            if from_env
            else f"cd {project} ({holds}), or set DAGSPEC_HOME={project}"
        )
    else:
        todo = "cd into your dagspec project (the folder holding dags/ and pipelines/), or set DAGSPEC_HOME to it"
    where = "$DAGSPEC_HOME" if from_env else "the current directory; DAGSPEC_HOME is not set"
    raise DagspecError(
        f"{home} ({where}) is not a dagspec project: it has {missing}, so Airflow would find no DAG to run; {todo}"
    )


_TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\dT")
_FAILED_IMPORT = re.compile(r"Failed to import: (?P<file>\S+)")


def no_run_cause(dag_id: str, code: int, home: Path, log: Sequence[str]) -> str:
    """Why ``airflow dags test`` started no run, from its log: the DAG files that failed to import
    (each with the last line of its traceback) when Airflow found no DAG ``dag_id``."""
    if not any("could not be found" in line for line in log):
        return f"`airflow dags test` exited with code {code} before starting a run of {dag_id!r}" + (
            "" if log else " (its output is above)"
        )
    failed = []
    for index, line in enumerate(log):
        if match := _FAILED_IMPORT.search(line):
            below = list(itertools.takewhile(lambda text: not _TIMESTAMPED.match(text), log[index + 1 :]))
            error = below[-1].strip() if below else "see the log"
            failed.append(f"{display(Path(match['file']), home)} failed to import: {error}")
    dags = display(home / "dags", home)
    why = "; ".join(failed) or (
        "no DAG file there defines it (dagspec's dags/dagspec_pipelines.py compiles the specs of "
        "$DAGSPEC_PIPELINES, which `dagspec run` sets to the spec's folder)"
    )
    return f"Airflow found no DAG {dag_id!r} in {dags}/: {why}"


def parse_overrides(pairs: Sequence[str], spec: PipelineSpec) -> dict[str, Any]:
    """``-p name=value`` pairs as run params, each checked against its declaration (``run_param_value``)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise DagspecError(f"-p expects name=value, got {pair!r}")
        if name == PARTITIONS_PARAM and spec.partitions is not None:  # dagspec's own run param: a scope
            overrides[name] = raw
            continue
        overrides[name] = yaml.safe_load(raw) if name == FORCE_PARAM else run_param_value(spec, name, raw)
    return overrides


def absolute_root(root: str | None) -> str | None:
    """A --storage-root made absolute (URIs unchanged)."""
    if root is None or "://" in root:
        return root
    return str(Path(root).resolve())
