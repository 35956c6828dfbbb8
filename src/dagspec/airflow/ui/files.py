"""Files of the storage root, and only those: the one place the UI turns a request's path into a file.

A requested path is relative to a DAG's folder under the storage root. Absolute paths, ``..``,
URIs and backslashes are refused before anything is opened; on a local root the real path (symlinks
resolved) must still lie inside the DAG's folder, so a symlink pointing out is refused too.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from dagspec import storage

MAX_INLINE_BYTES = 8 * 1024 * 1024  # larger files are linked, never inlined or rendered


class OutsideRootError(ValueError):
    """A path that would leave the storage root (or the DAG's folder in it)."""


@dataclass(frozen=True)
class StoredFile:
    """One readable file under the storage root: where it is, and its path relative to the DAG's folder."""

    path: str
    relative: str


def _dag_dir(root: str, dag_id: str) -> str:
    if not dag_id or "/" in dag_id or "\\" in dag_id or dag_id in (".", ".."):
        raise OutsideRootError(f"not a DAG id: {dag_id!r}")
    return f"{root.rstrip('/')}/{dag_id}"


def _clean(relative: str) -> str:
    if "\x00" in relative or "\\" in relative:
        raise OutsideRootError(f"not a relative path: {relative!r}")
    if any(part == ".." for part in relative.split("/")):
        raise OutsideRootError(f"'..' is not allowed: {relative!r}")
    try:
        return storage.check_relative(relative)
    except ValueError as exc:
        raise OutsideRootError(str(exc)) from None


def stored_file(root: str, dag_id: str, relative: str) -> StoredFile:
    """The file ``relative`` names inside ``<root>/<dag_id>``; OutsideRootError for anything else.

    Locally the resolved path must stay inside the DAG's resolved folder (a symlink out of it is
    refused) and be a regular file; FileNotFoundError when it does not exist.
    """
    base = _dag_dir(root, dag_id)
    clean = _clean(relative)
    if not storage.is_local(base):
        path = f"{base}/{clean}"
        if not storage.exists(path) or storage.is_dir(path):
            raise FileNotFoundError(path)
        return StoredFile(path, clean)
    real_base = os.path.realpath(storage.local_path(base))
    real = os.path.realpath(os.path.join(real_base, clean))
    if os.path.commonpath([real_base, real]) != real_base or real == real_base:
        raise OutsideRootError(f"{relative!r} leads outside the storage root")
    if not os.path.isfile(real):
        raise FileNotFoundError(relative)
    return StoredFile(real, clean)


def read_bytes(path: str, limit: int = MAX_INLINE_BYTES) -> bytes | None:
    """A file's bytes, or None when it is larger than ``limit``."""
    if storage.is_local(path):
        local = storage.local_path(path)
        if os.path.getsize(local) > limit:
            return None
        with open(local, "rb") as handle:
            return handle.read()
    fs, fs_path = storage.remote(path)
    if int(fs.size(fs_path)) > limit:
        return None
    with fs.open(fs_path, "rb") as handle:
        return bytes(handle.read())


def checkpoint_files(checkpoint: str, table_outputs: set[str]) -> list[str]:
    """Files of a committed checkpoint worth showing, relative to it: reports, plots, model cards,
    metrics. Table outputs (Parquet folders), hidden and marker files are left out."""
    found: list[str] = []
    for info in storage.list_files(checkpoint):
        inner = posixpath.relpath(storage.local_path(info.path), storage.local_path(checkpoint))
        top = inner.split("/", 1)[0]
        if top in table_outputs or inner.endswith((".parquet", ".crc")):
            continue
        found.append(inner)
    return sorted(found)
