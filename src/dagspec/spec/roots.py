"""The deployment's roots: where checkpoints live, which storage roots and watched folders a spec may name.

An administrator sets them in the environment of every Airflow component and of ``dagspec``; a spec
never widens them:

- ``DAGSPEC_STORAGE_ROOT``: the deployment's storage root. Every task writes its checkpoints there
  (a spec's ``storage.root`` applies only where it is unset: ``dagspec run``), and the API server's
  results view serves from it alone. Unset: the project's default, ``<project>/.dagspec/storage``.
- ``DAGSPEC_STORAGE_ROOTS``: more roots (comma-separated paths or URIs) a spec's ``storage.root``
  may lie under, besides the deployment root and the project's default, which are always allowed.
- ``DAGSPEC_WATCH_ROOTS``: folders (comma-separated) a ``schedule: {files: GLOB}`` may watch besides
  the project directory.

Local paths are compared after resolving ``..`` and symlinks, so a path that leads out through either
is refused; a URI (``hdfs://``, ``s3a://``, ``http://``) only under a URI root listed by the
administrator, never with a ``..``.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote

from dagspec import storage

STORAGE_ROOT_ENV = "DAGSPEC_STORAGE_ROOT"
STORAGE_ROOTS_ENV = "DAGSPEC_STORAGE_ROOTS"
WATCH_ROOTS_ENV = "DAGSPEC_WATCH_ROOTS"
DEFAULT_STORAGE_ROOT = ".dagspec/storage"
_GLOB_CHARS = re.compile(r"[*?\[{]")


def absolute(path: str, home: Path) -> str:
    """A URI as it is (no trailing slash); a local path (``file://`` too) absolute against ``home``,
    with ``..`` and symlinks resolved."""
    if storage.is_uri(path) and not path.startswith("file://"):
        return path.rstrip("/")
    return os.path.realpath(home / storage.local_path(path))


def root_path(root: str, home: Path | None = None) -> str:
    """A storage root as the tasks use it: a URI as it is (no trailing slash), a local path absolute
    against the project."""
    if storage.is_uri(root):
        return root.rstrip("/")
    return str(((home or storage.project_home()) / root).resolve())


def deployment_storage_root(home: Path | None = None) -> str:
    """The deployment's storage root: ``$DAGSPEC_STORAGE_ROOT``, else ``<project>/.dagspec/storage``."""
    return root_path(os.environ.get(STORAGE_ROOT_ENV) or DEFAULT_STORAGE_ROOT, home)


def _listed(variable: str) -> list[str]:
    return [p.strip() for p in os.environ.get(variable, "").split(",") if p.strip()]


def allowed_storage_roots(home: Path | None = None) -> list[str]:
    """The roots a spec's ``storage.root`` may lie under: the deployment root, the project's default
    and ``$DAGSPEC_STORAGE_ROOTS``."""
    home = home or storage.project_home()
    found = [absolute(deployment_storage_root(home), home), absolute(DEFAULT_STORAGE_ROOT, home)]
    found += [absolute(root, home) for root in _listed(STORAGE_ROOTS_ENV)]
    return list(dict.fromkeys(found))


def allowed_watch_roots(home: Path | None = None) -> list[str]:
    """The folders a files schedule may watch: the project and ``$DAGSPEC_WATCH_ROOTS``."""
    home = home or storage.project_home()
    found = [absolute(".", home)] + [absolute(root, home) for root in _listed(WATCH_ROOTS_ENV)]
    return list(dict.fromkeys(p for p in found if not storage.is_uri(p)))


def is_under(path: str, roots: list[str]) -> bool:
    """Is the absolute ``path`` (from ``absolute``) one of ``roots`` or inside one?"""
    if storage.is_uri(path):
        parts = path.split("://", 1)[1].split("/")
        if any(unquote(part) in ("..", ".") for part in parts):  # a server may decode %2E%2E
            return False
        return any(path == root or path.startswith(f"{root}/") for root in roots if storage.is_uri(root))
    return any(not storage.is_uri(root) and os.path.commonpath([root, path]) == root for root in roots)


def _shown(path: str, resolved: str) -> str:
    same = storage.is_uri(resolved) or posixpath.normpath(path) == resolved
    return repr(path) if same else f"{path!r} (resolved: {resolved})"


def check_storage_root(root: str, home: Path | None = None) -> str:
    """``root`` unchanged, or a ValueError saying it lies outside the deployment's storage roots."""
    home = home or storage.project_home()
    resolved = absolute(root, home)
    allowed = allowed_storage_roots(home)
    if is_under(resolved, allowed):
        return root
    what = "a URI" if storage.is_uri(resolved) else "a folder"
    raise ValueError(
        f"{_shown(root, resolved)} is {what} outside the deployment's storage roots ({', '.join(allowed)}); "
        f"an administrator can allow a root with {STORAGE_ROOTS_ENV} (docs/security.md)"
    )


def glob_base(pattern: str) -> str:
    """The folder a glob lists: its path up to the first part with a wildcard."""
    parts = pattern.split("/")
    fixed = next((i for i, part in enumerate(parts) if _GLOB_CHARS.search(part)), len(parts) - 1)
    return "/".join(parts[:fixed]) or ("/" if pattern.startswith("/") else ".")


def check_watch_glob(pattern: str, home: Path | None = None) -> str:
    """``pattern`` unchanged, or a ValueError saying the folder it lists is outside the project and
    the deployment's watch roots."""
    home = home or storage.project_home()
    base = glob_base(pattern)
    resolved = absolute(base, home)
    allowed = allowed_watch_roots(home)
    if is_under(resolved, allowed):
        return pattern
    raise ValueError(
        f"{pattern!r} lists {resolved}, outside the project and the deployment's watch roots "
        f"({', '.join(allowed)}); an administrator can allow a folder with {WATCH_ROOTS_ENV} (docs/security.md)"
    )
