"""Content digests of written outputs: what early cutoff compares (see ``dagspec.checkpoint``).

A digest covers every byte of an output's files, named by their place in it, except what a writer
puts there without it being data: Spark's random part-file UUIDs in names, ``_SUCCESS`` and
``.crc`` markers, and the order parquet-mr gives a footer's encodings lists.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
from typing import Any

from dagspec import storage

# Spark names each part file with a random job UUID: ``part-00003-<uuid>-c000.snappy.parquet``.
_PART_UUID = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _is_marker(name: str) -> bool:
    """Files a writer adds beside the data: Hadoop's ``_SUCCESS`` and its ``.<file>.crc`` checksums."""
    return name == "_SUCCESS" or (name.startswith(".") and name.endswith(".crc"))


def tree_digest(path: str) -> str:
    """A SHA-256 of the bytes of every file under ``path`` (a file or a tree), named by relative path.

    Two writes of the same data give the same digest: Spark's random part-file UUIDs are left out
    of the names, the writer's markers (``_SUCCESS``, ``.crc``) too, and a Parquet footer counts by
    its content (see ``_parquet_digest``). Anything else (a byte, a file, a file's place) changes
    it. Files are streamed, never held whole.
    """
    files: list[tuple[str, Any]] = []
    if storage.is_local(path):
        root = storage.local_path(path)
        if os.path.isfile(root):
            files.append((os.path.basename(root), root))
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            for name in names:
                if not _is_marker(name):
                    full = os.path.join(folder, name)
                    files.append((os.path.relpath(full, root), full))
        opener: Any = open
    else:
        fs, fs_path = storage.remote(path)
        base = fs_path.rstrip("/")
        for found in fs.find(fs_path):
            name = str(found)
            if not _is_marker(posixpath.basename(name)):
                files.append((posixpath.relpath(name, base) if name != base else posixpath.basename(name), name))
        opener = fs.open
    digest = hashlib.sha256()
    for relative, full in sorted((_PART_UUID.sub("", r), f) for r, f in files):
        with opener(full, "rb") as handle:
            file_hash = _parquet_digest(handle) if relative.endswith(".parquet") else None
            if file_hash is None:
                handle.seek(0)
                file_hash = hashlib.file_digest(handle, "sha256").hexdigest()
        digest.update(f"{relative}\0{file_hash}\n".encode())
    return digest.hexdigest()[:32]


def _parquet_digest(handle: Any) -> str | None:
    """A Parquet file's bytes up to its footer, then its footer read as data (None: not Parquet).

    parquet-mr lists each column chunk's encodings from a hash set whose order follows the JVM's
    identity hashes: the same rows written by two JVMs differ in those footer bytes only. The
    footer is therefore hashed as its parsed content with each encodings list sorted.
    """
    import pyarrow.parquet as pq

    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    if size < 12:
        return None
    handle.seek(size - 8)
    tail = handle.read(8)
    footer = int.from_bytes(tail[:4], "little")
    if tail[4:] != b"PAR1" or footer + 12 > size:
        return None
    body = hashlib.sha256()
    handle.seek(0)
    left = size - 8 - footer
    while left > 0:
        chunk = handle.read(min(left, 1 << 20))
        if not chunk:
            return None
        body.update(chunk)
        left -= len(chunk)
    handle.seek(0)
    meta = pq.read_metadata(handle)
    described = meta.to_dict()
    for group in described.get("row_groups", []):
        for column in group.get("columns", []):
            column["encodings"] = sorted(column.get("encodings") or [])
    described["key_value"] = {str(k): str(v) for k, v in (meta.metadata or {}).items()}
    body.update(json.dumps(described, sort_keys=True, default=str).encode())
    return body.hexdigest()
