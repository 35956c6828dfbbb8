"""Versioned JSON contracts between stages: one reader that checks the version, then the model.

A stage writes a contract file (``model.json``, ``metrics.json``) from its pydantic model; every
reader (the next stages, the UI, the benchmarks) parses it here, so an old or newer file is
refused the same way everywhere, with the file, its version and what this dagspec reads. Only
pydantic here: the Airflow side reads these files too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from dagspec.errors import StageFailedError

Model = TypeVar("Model", bound=BaseModel)


def parse_versioned(
    text: str | bytes, where: str, model: type[Model], *, field: str, current: int, what: str, again: str
) -> Model:
    """``text`` (the file shown as ``where``) as ``model`` if its ``field`` is ``current``, else why not.

    ``what`` names the contract (``model card``), ``again`` is the way out for an old or newer file
    (``run its training stage again``).
    """
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StageFailedError(f"{where}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise StageFailedError(f"{where}: must hold a JSON object")
    reads = f"this dagspec reads {field} {current}"
    version = data.get(field)  # the one key read before the model: which model reads the rest
    if version is None:
        raise StageFailedError(f"{where} was written before {what}s were versioned (no {field}); {reads}: {again}")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StageFailedError(f"{where}: {field} must be a positive integer, got {version!r}; {reads}")
    if version > current:
        raise StageFailedError(
            f"{where} has {field} {version}, newer than this dagspec reads ({field} {current}): upgrade dagspec, "
            f"or {again} with this one"
        )
    if version < current:
        raise StageFailedError(f"{where} has {field} {version}, older than {reads}: {again}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or what}: {error['msg']}" for error in exc.errors()
        )
        raise StageFailedError(f"{where} is not a valid {what}: {problems}") from None


def write_versioned(model: BaseModel, folder: Path, name: str) -> Path:
    """Write ``model`` as the file ``name`` of ``folder`` (indented JSON); its path."""
    path = folder / name
    path.write_text(model.model_dump_json(indent=2))
    return path


def read_versioned(
    folder: Path, name: str, parse: Callable[[bytes, str], Model], *, shown_as: str | None, not_a: str
) -> Model:
    """The file ``name`` of ``folder`` (shown as ``shown_as``) through ``parse``; fails when there is no
    such file (``folder`` is then ``not_a`` what the reader wants) and wherever ``parse`` fails."""
    path = folder / name
    where = shown_as or str(folder)
    if not path.is_file():
        raise StageFailedError(f"{where} is not {not_a}: no {name}")
    return parse(path.read_bytes(), f"{where}/{name}")
