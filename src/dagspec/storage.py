"""The filesystem layer: paths, URIs and the few operations checkpoints and readers need.

Local paths (and ``file://`` URIs) use the OS directly; other URIs (``hdfs://``, ``s3a://``,
``gs://``, ...) go through fsspec. Nothing here needs Spark or its JVM, so the Airflow side, the
CLI and a Spark Connect client all see the same files the same way.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import posixpath
import re
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagspec.errors import StorageError

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# Hadoop's names for object stores that fsspec knows under another protocol.
_FSSPEC_PROTOCOLS = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs", "wasbs": "abfs"}
_GLOB_CHARS = re.compile(r"[*?\[{]")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def is_uri(path: str) -> bool:
    """True for ``scheme://...`` paths (hdfs://, s3a://, file://)."""
    return bool(_URI.match(path))


def is_local(path: str) -> bool:
    """A plain path or a ``file://`` URI."""
    return not is_uri(path) or path.startswith("file://")


def local_path(path: str) -> str:
    """``file:///x`` -> ``/x``; anything else unchanged."""
    return path[len("file://") :] if path.startswith("file://") else path


def project_home() -> Path:
    """The project directory: $DAGSPEC_HOME, else the current directory."""
    return Path(os.environ.get("DAGSPEC_HOME") or os.getcwd()).resolve()


def resolve_input_path(path: str, home: Path) -> str:
    """A read path: URIs as they are, relative local paths against the project directory."""
    if is_uri(path) or os.path.isabs(path):
        return path
    return str(home / path)


def check_relative(path: str) -> str:
    """A path that must stay under a root: relative, no '..', no URI; returned normalized."""
    if is_uri(path) or "://" in path or path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise ValueError(f"must be a path relative to storage.root, got {path!r}")
    normalized = posixpath.normpath(path.replace("\\", "/"))
    if normalized == ".." or normalized.startswith("../") or normalized in (".", ""):
        raise ValueError(f"must stay inside storage.root, got {path!r}")
    return normalized


def join_under(root: str, relative: str) -> str:
    """``root/relative``, refusing anything that would leave ``root``."""
    try:
        normalized = check_relative(relative)
    except ValueError:
        raise StorageError(f"path {relative!r} would leave the storage root {root!r}") from None
    return f"{root.rstrip('/')}/{normalized}"


def remote(path: str) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it) for a URI."""
    return _remote(path)


def _remote(path: str) -> tuple[Any, str]:
    import fsspec

    scheme, _, rest = path.partition("://")
    protocol = _FSSPEC_PROTOCOLS.get(scheme.lower(), scheme.lower())
    try:
        fs, fs_path = fsspec.core.url_to_fs(f"{protocol}://{rest}")
        return fs, str(fs_path)
    except (ImportError, ValueError) as exc:
        raise StorageError(f"cannot open {path!r}: {exc} (install the fsspec backend for {scheme}://)") from None


def exists(path: str) -> bool:
    """Does a file or directory exist at ``path``?"""
    if is_local(path):
        return os.path.exists(local_path(path))
    fs, fs_path = _remote(path)
    return bool(fs.exists(fs_path))


def is_dir(path: str) -> bool:
    """Is ``path`` a directory?"""
    if is_local(path):
        return os.path.isdir(local_path(path))
    fs, fs_path = _remote(path)
    return bool(fs.isdir(fs_path))


def list_names(path: str) -> list[str]:
    """Names directly inside a directory (empty when it does not exist), sorted."""
    if is_local(path):
        try:
            return sorted(os.listdir(local_path(path)))
        except FileNotFoundError:
            return []
    fs, fs_path = _remote(path)
    if not fs.exists(fs_path):
        return []
    return sorted(posixpath.basename(str(p).rstrip("/")) for p in fs.ls(fs_path, detail=False))


def read_text(path: str) -> str | None:
    """The text of a file, or None when it does not exist."""
    try:
        if is_local(path):
            return Path(local_path(path)).read_text(encoding="utf-8")
        fs, fs_path = _remote(path)
        with fs.open(fs_path, "r", encoding="utf-8") as handle:
            return str(handle.read())
    except FileNotFoundError:
        return None


def write_text(path: str, text: str) -> None:
    """Write a whole file; locally through a temporary sibling and a rename, so readers never see half."""
    if is_local(path):
        target = Path(local_path(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
        return
    fs, fs_path = _remote(path)
    with fs.open(fs_path, "w", encoding="utf-8") as handle:
        handle.write(text)


def create_exclusive(path: str, text: str) -> bool:
    """Create a file only if none exists (atomic locally); False when it already existed."""
    if is_local(path):
        target = local_path(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return True
    fs, fs_path = _remote(path)
    if fs.exists(fs_path):  # object stores have no exclusive create: best effort
        return False
    with fs.open(fs_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def makedirs(path: str) -> None:
    """Create a directory and its parents."""
    if is_local(path):
        os.makedirs(local_path(path), exist_ok=True)
        return
    fs, fs_path = _remote(path)
    fs.makedirs(fs_path, exist_ok=True)


def rename(src: str, dst: str) -> None:
    """Move ``src`` to ``dst`` (which must not exist); atomic on local and HDFS filesystems."""
    _refuse_existing(src, dst, "rename")
    if is_local(src) and is_local(dst):
        target = local_path(dst)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.rename(local_path(src), target)
        return
    fs, fs_src = _remote(src)
    fs.mv(fs_src, _remote(dst)[1], recursive=True)


def _refuse_existing(src: str, dst: str, verb: str) -> None:
    if exists(dst):
        raise StorageError(f"cannot {verb} {src} to {dst}: the target exists")


def exchange(a: str, b: str) -> bool:
    """Swap two existing directories in one atomic step (Linux renameat2); False where impossible."""
    if not (is_local(a) and is_local(b)):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(local_path(a)), _AT_FDCWD, os.fsencode(local_path(b)), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.EOPNOTSUPP):
        return False
    raise StorageError(f"cannot exchange {a} and {b}: {os.strerror(code)}")


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link of local file ``src`` at ``dst``; a copy where links cannot be made."""
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or links not allowed
        shutil.copy2(src, dst)


def link_tree(src: str, dst: str) -> None:
    """``dst`` (which must not exist) with the files of ``src``: hard links where possible, else copies.

    For committed checkpoint data, whose files are never modified in place, so sharing them is safe.
    """
    local = is_local(src) and is_local(dst)
    _refuse_existing(src, dst, "link" if local else "copy")
    if local:
        source, target = local_path(src), local_path(dst)
        for folder, _, names in os.walk(source):
            into = os.path.join(target, os.path.relpath(folder, source))
            os.makedirs(into, exist_ok=True)
            for name in names:
                _link_or_copy(os.path.join(folder, name), os.path.join(into, name))
        return
    fs, fs_src = _remote(src)
    fs.copy(fs_src, _remote(dst)[1], recursive=True)


def link_parts(sources: Sequence[tuple[str, str]], dst: str) -> None:
    """``dst`` (which must not exist) holding the data files of several Parquet folders side by side,
    each named ``<prefix>-<its name>`` (hard links where possible, else copies): one table of the
    partitions of a partitioned stage. Marker and hidden files (``_SUCCESS``, ``.crc``) are left out."""
    if exists(dst):
        raise StorageError(f"cannot link into {dst}: the target exists")
    for prefix, src in sources:
        for info in list_files(src):
            name = info.path.rstrip("/").rsplit("/", 1)[-1]
            target = f"{dst.rstrip('/')}/{prefix}-{name}"
            if is_local(info.path) and is_local(dst):
                os.makedirs(local_path(dst), exist_ok=True)
                _link_or_copy(local_path(info.path), local_path(target))
            else:
                fs, fs_src = _remote(info.path)
                fs.copy(fs_src, _remote(target)[1])
    if not exists(dst):  # no partition held a file: an empty folder is still the output
        makedirs(dst)


def delete(path: str) -> None:
    """Remove a file or a directory tree; nothing when it does not exist."""
    if is_local(path):
        target = local_path(path)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target, ignore_errors=True)
        elif os.path.lexists(target):
            os.unlink(target)
        return
    fs, fs_path = _remote(path)
    if fs.exists(fs_path):
        fs.rm(fs_path, recursive=True)


def size_of(path: str) -> int:
    """Bytes under ``path`` (a file or a directory tree)."""
    if is_local(path):
        target = local_path(path)
        if os.path.isfile(target):
            return os.path.getsize(target)
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(target) for f in names)
    fs, fs_path = _remote(path)
    return int(fs.du(fs_path))


@dataclass(frozen=True)
class FileInfo:
    """One data file: what identifies its content without reading it.

    ``target``: for a file reached through a symlink (the file itself or a folder above it), the
    real path and inode it resolves to, so that a link retargeted to a file of the same size and
    modification time is seen; empty otherwise.
    """

    path: str
    size: int
    mtime_ns: int
    etag: str = ""
    target: str = ""


def _expand_braces(pattern: str) -> list[str]:
    """Hadoop glob braces, ``day_{01,02}.tsv`` -> two patterns (Python's glob has no braces)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for option in match.group(1).split(",") for p in _expand_braces(head + option + tail)]


def spark_skips(name: str) -> bool:
    """Does Spark's file listing skip this file or folder name? (``HadoopFSUtils.shouldFilterOutPathName``)

    Names starting with ``_`` or ``.`` are skipped, except partition folders (any name with a
    ``=``, ``_k=v`` too) and Parquet's ``_metadata`` / ``_common_metadata`` summaries; so are names
    ending in ``._COPYING_`` (a copy under way).
    """
    hidden = (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")
    return hidden and not name.startswith(("_common_metadata", "_metadata"))


def _is_data_file(name: str) -> bool:
    """A listed file Spark reads as data (``PartitioningAwareFileIndex.isDataPath``): not the summaries."""
    return not spark_skips(name) and not (name.startswith("_") and "=" not in name)


def list_files(pattern: str) -> list[FileInfo]:
    """The files Spark reads for a file, a directory (recursively) or a glob, sorted by path.

    Spark's rules (4.x): in a directory, names ``spark_skips`` are left out (``_SUCCESS``, ``.crc``,
    ``_temporary``) but partition folders such as ``_k=v`` are read; symlinked folders are
    followed (a folder inside itself is listed once); a glob's ``*`` matches dot names too.
    """
    found: dict[str, FileInfo] = {}
    for single in _expand_braces(pattern):
        if is_local(single):
            _list_local(local_path(single), found, uri=single.startswith("file://"))
        else:
            _list_remote(single, found)
    return [found[p] for p in sorted(found)]


def _list_local(pattern: str, found: dict[str, FileInfo], *, uri: bool) -> None:
    matches = sorted(glob.glob(pattern, include_hidden=True)) if _GLOB_CHARS.search(pattern) else [pattern]
    for match in matches:
        if os.path.isdir(match):
            _walk_local(match, os.path.realpath(match), found, uri, frozenset())
        elif os.path.isfile(match) and _is_data_file(os.path.basename(match)):
            _add_local(match, os.path.realpath(match), os.stat(match), found, uri)


def _walk_local(
    folder: str, real: str, found: dict[str, FileInfo], uri: bool, above: frozenset[tuple[int, int]]
) -> None:
    """List ``folder`` (whose real path is ``real``) as Spark does; ``above``: the folders it is inside."""
    stat = os.stat(folder)
    here = (stat.st_dev, stat.st_ino)
    if here in above:  # a symlink to a folder above: Spark would recurse until the OS gives up
        return
    with os.scandir(folder) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        if spark_skips(entry.name):
            continue
        real_entry = os.path.realpath(entry.path) if entry.is_symlink() else os.path.join(real, entry.name)
        if entry.is_dir():  # follows a symlink, as Hadoop's local file system does
            _walk_local(entry.path, real_entry, found, uri, above | {here})
        elif entry.is_file() and _is_data_file(entry.name):
            _add_local(entry.path, real_entry, entry.stat(), found, uri)


def _add_local(path: str, real: str, stat: os.stat_result, found: dict[str, FileInfo], uri: bool) -> None:
    key = f"file://{path}" if uri else path
    target = f"{real}@{stat.st_ino}" if real != os.path.abspath(path) else ""
    found[key] = FileInfo(key, stat.st_size, stat.st_mtime_ns, target=target)


def _list_remote(pattern: str, found: dict[str, FileInfo]) -> None:
    fs, fs_path = _remote(pattern)
    scheme = pattern.split("://", 1)[0]
    paths = fs.glob(fs_path) if _GLOB_CHARS.search(fs_path) else [fs_path]
    for path in paths:
        base = str(path).rstrip("/")
        infos = fs.find(path, detail=True).values() if fs.isdir(path) else [fs.info(path)]
        for info in infos:
            name = str(info["name"])
            relative = name[len(base) + 1 :] if name.startswith(base + "/") else posixpath.basename(name)
            *folders, leaf = relative.split("/")  # Spark's rule holds at every depth under the listed path
            if info.get("type") == "directory" or any(spark_skips(f) for f in folders) or not _is_data_file(leaf):
                continue
            mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
            stamp = int(mtime.timestamp() * 1e9) if hasattr(mtime, "timestamp") else int(float(mtime) * 1e9)
            etag = str(info.get("ETag") or info.get("etag") or "")
            size = int(info.get("size") or 0)
            key = f"{scheme}://{name.removeprefix(scheme + '://')}"
            found[key] = FileInfo(key, size, stamp, etag)
