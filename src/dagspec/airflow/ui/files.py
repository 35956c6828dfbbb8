"""Files of committed checkpoints, and only those: the one place the UI turns a request's path into a file.

The root is the deployment's (``dagspec.spec.roots.deployment_storage_root``), never a spec's. A
requested path is relative to a DAG's folder under it and must name a file of a ``files`` output
(a report, a plot, a model) that the manifest of a committed checkpoint lists:
``<stage>/<fingerprint>/<output>/<file>``. Anything else (markers, manifests, leases, a watcher's
records, tables, attempts, a path with ``..``, an absolute path or a URI) is ``NotServedError``;
on a local root the real path (symlinks resolved) must lie inside the output's folder.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from dagspec import storage
from dagspec.checkpoint import Checkpoint
from dagspec.kinds.base import IOType

MAX_INLINE_BYTES = 8 * 1024 * 1024  # larger files are linked, never inlined or rendered


class NotServedError(LookupError):
    """A path the UI does not serve: outside the DAG's folder, or no file of a committed checkpoint's output."""


@dataclass(frozen=True)
class StoredFile:
    """One readable file under the storage root: where it is, and its path relative to the DAG's folder."""

    path: str
    relative: str


def _dag_dir(root: str, dag_id: str) -> str:
    if not dag_id or "/" in dag_id or "\\" in dag_id or dag_id in (".", ".."):
        raise NotServedError(f"not a DAG id: {dag_id!r}")
    return f"{root.rstrip('/')}/{dag_id}"


def _clean(relative: str) -> str:
    if "\x00" in relative or "\\" in relative:
        raise NotServedError(f"not a relative path: {relative!r}")
    if any(part == ".." for part in relative.split("/")):
        raise NotServedError(f"'..' is not allowed: {relative!r}")
    try:
        return storage.check_relative(relative)
    except ValueError as exc:
        raise NotServedError(str(exc)) from None


def file_outputs(checkpoint: Checkpoint) -> list[str]:
    """The ``files`` outputs the manifest of a committed checkpoint lists (none when not committed)."""
    if not checkpoint.state().done:
        return []
    outputs = (checkpoint.manifest() or {}).get("outputs") or {}
    return sorted(
        name for name, described in outputs.items()
        if isinstance(described, dict) and described.get("type") == IOType.FILES.value
    )  # fmt: skip


def stored_file(root: str, dag_id: str, relative: str) -> StoredFile:
    """The file ``relative`` names in ``<root>/<dag_id>`` if it is a file of a committed checkpoint's
    ``files`` output; NotServedError for anything else (missing files included)."""
    base = _dag_dir(root, dag_id)
    clean = _clean(relative)
    parts = clean.split("/")
    if len(parts) < 4 or any(part.startswith(("_", ".")) for part in parts):
        raise NotServedError(f"{relative!r} is no file of a checkpoint's output")
    stage, fingerprint, output = parts[:3]
    if output not in file_outputs(Checkpoint(f"{base}/{stage}", fingerprint)):
        raise NotServedError(f"{relative!r} is no file of a committed checkpoint's output")
    folder, path = f"{base}/{stage}/{fingerprint}/{output}", f"{base}/{clean}"
    if not storage.is_local(base):
        if not storage.exists(path) or storage.is_dir(path):
            raise NotServedError(f"no file {relative!r}")
        return StoredFile(path, clean)
    real_folder = os.path.realpath(storage.local_path(folder))
    real = os.path.realpath(storage.local_path(path))
    if os.path.commonpath([real_folder, real]) != real_folder or not os.path.isfile(real):
        raise NotServedError(f"{relative!r} is no file inside {output!r}")
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


def checkpoint_files(checkpoint: str, table_outputs: Iterable[str] = ()) -> list[str]:
    """The files the UI serves of a checkpoint, relative to it: those of the ``files`` outputs its
    manifest lists once committed (reports, plots, model cards), hidden and marker files left out,
    and no output named in ``table_outputs``."""
    stage_dir, _, fingerprint = checkpoint.rstrip("/").rpartition("/")
    tables = set(table_outputs)
    found: list[str] = []
    for output in file_outputs(Checkpoint(stage_dir, fingerprint)):
        if output in tables:
            continue
        for info in storage.list_files(f"{checkpoint}/{output}"):
            inner = posixpath.relpath(storage.local_path(info.path), storage.local_path(checkpoint))
            if not inner.endswith(".crc"):
                found.append(inner)
    return sorted(found)
