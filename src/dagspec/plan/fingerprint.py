"""The cache key of a stage: what must be unchanged for a checkpoint to be reused.

A key holds the kind, the rendered params, the code (a hash of the kind's module and of every
first-party module it imports, transitively, plus the runner module that writes outputs, and the
versions of the third-party libraries they import), the input data (source stages: every file
Spark reads, by Spark's listing rules, with its size and modification time, the store's etag, and
for a file reached through a symlink its real path and inode), the upstream fingerprints and the
Spark settings that can change results. The fingerprint is a hash of the key; the key itself goes into
the manifest so that a later run can say what changed.

Code is hashed as its syntax tree without docstrings: editing a comment, a docstring or the
formatting does not rerun anything; editing any statement does.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from dagspec import storage

RUNNER_MODULE = "dagspec.job.runtime"
# Settings that only size or observe a run; every other conf key is in the key. Whole families
# end with a dot. The allowlist's resource keys (dagspec.spec.safety.ALLOWED_RESOURCE_CONF) are all
# here; the rest only matter for keys an administrator allows (DAGSPEC_ALLOWED_CONF).
RESOURCE_ONLY_CONF: tuple[str, ...] = (
    "spark.app.name",
    "spark.driver.memory",
    "spark.driver.memoryOverhead",
    "spark.driver.memoryOverheadFactor",
    "spark.driver.cores",
    "spark.driver.maxResultSize",
    "spark.driver.host",
    "spark.driver.bindAddress",
    "spark.driver.port",
    "spark.executor.memory",
    "spark.executor.memoryOverhead",
    "spark.executor.memoryOverheadFactor",
    "spark.executor.pyspark.memory",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.executor.heartbeatInterval",
    "spark.cores.max",
    "spark.task.maxFailures",
    "spark.network.timeout",
    "spark.sql.broadcastTimeout",
    "spark.locality.wait",
    "spark.speculation",
    "spark.memory.",
    "spark.ui.",
    "spark.eventLog.",
    "spark.history.",
    "spark.dynamicAllocation.",
    "spark.scheduler.",
    "spark.log.",
    "spark.metrics.",
    "spark.python.worker.reuse",
    "spark.python.worker.memory",
)


def conf_key_in(key: str, entries: tuple[str, ...]) -> bool:
    """Is ``key`` one of ``entries``, or under one of them that ends with a dot (a prefix)?"""
    return any(key == e or (e.endswith(".") and key.startswith(e)) for e in entries)


def result_conf(conf: Mapping[str, Any]) -> dict[str, str]:
    """The conf entries that can change what a stage computes (all but the resource-only ones)."""
    return {key: str(value) for key, value in sorted(conf.items()) if not conf_key_in(key, RESOURCE_ONLY_CONF)}


Roots = tuple[tuple[str | None, Path], ...]


def _first_party_roots(kind_module: str) -> Roots:
    """Where the kind's own code lives: dagspec's source, and the kind's package or plugins folder.

    Each root is (package prefix or None, folder): a module name is first-party when its file
    lies there. Nothing is imported to find out (importing ``tensorflow.keras`` to locate it
    would cost seconds).
    """
    import dagspec

    roots: list[tuple[str | None, Path]] = [("dagspec", Path(dagspec.__file__).parent.parent)]
    top = kind_module.partition(".")[0]
    loaded = sys.modules.get(top)
    origin = getattr(loaded, "__file__", None)
    if top != "dagspec" and origin:
        if Path(origin).name == "__init__.py":
            roots.append((top, Path(origin).parent.parent))
        else:  # a plain module (a plugins/ file): its folder's modules are its own code
            roots.append((None, Path(origin).parent))
    return tuple(roots)


def _locate(name: str, roots: Roots) -> Path | None:
    """The source file of first-party module ``name``, or None (third-party, builtin, not a module)."""
    for prefix, base in roots:
        if prefix is not None and name != prefix and not name.startswith(prefix + "."):
            continue
        relative = base.joinpath(*name.split("."))
        for candidate in (relative.parent / f"{relative.name}.py", relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module an import statement anywhere in the tree names (functions' bodies included)."""
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


@cache
def _parsed(path: Path, name: str) -> tuple[str, frozenset[str]]:
    """(hash of the code of a module file, the modules it imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imports = frozenset(_imported_names(tree, name, path.name == "__init__.py"))
    digest = hashlib.sha256(ast.dump(_strip_docstrings(tree)).encode()).hexdigest()[:16]
    return digest, imports


@cache
def code_hashes(module: str) -> dict[str, str]:
    """Module -> code hash for a kind's module and every first-party module it imports, transitively.

    First-party: dagspec's own modules, and modules living beside the kind's module (its
    package, or the plugins folder). Third-party imports are represented by their distribution's
    version instead (see ``library_versions``). Only import statements are followed, so what a
    kind runs is imported by name (the scoring flavors through the static registry
    ``dagspec.kinds.scoring.flavors``); a test refuses ``import_module`` of a built name.
    """
    roots = _first_party_roots(module)
    found: dict[str, str] = {}
    imports_of: dict[str, frozenset[str]] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        path = _locate(name, roots)
        if path is None:
            continue
        found[name], imports_of[name] = _parsed(path, name)
        pending.extend(i for i in imports_of[name] if i not in found)
    runner = _locate(RUNNER_MODULE, roots)
    if runner is not None:  # the code that writes what the function returns; not what it imports
        found[RUNNER_MODULE] = _parsed(runner, RUNNER_MODULE)[0]
    _IMPORTS.update(imports_of)
    return dict(sorted(found.items()))


_IMPORTS: dict[str, frozenset[str]] = {}


@cache
def _distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


@cache
def library_versions(modules: tuple[str, ...]) -> dict[str, str]:
    """Distribution -> version of the third-party packages the given modules import."""
    tops = {i.partition(".")[0] for name in modules for i in _IMPORTS.get(name, ())}
    versions: dict[str, str] = {}
    for top in sorted(tops - {"dagspec", *sys.stdlib_module_names}):
        for dist in _distributions().get(top, []):
            try:
                versions[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return versions


def data_identity(patterns: list[str], home: Path) -> tuple[dict[str, str], list[str]]:
    """(file -> "size:mtime_ns[:etag][:->real_path@inode]" for every file Spark reads, the files in order).

    The files are those ``storage.list_files`` lists by Spark's own rules (partition folders such
    as ``_k=v`` in, ``_SUCCESS`` and dot files out, symlinked folders followed); a file reached
    through a symlink is also known by what it resolves to.
    """
    identity: dict[str, str] = {}
    files: list[str] = []
    for pattern in patterns:
        resolved = storage.resolve_input_path(pattern, home)
        matched = storage.list_files(resolved)
        if not matched:
            identity[resolved] = "no files match"
        for info in matched:
            link = f":->{info.target}" if info.target else ""  # a retargeted symlink changes it
            identity[info.path] = f"{info.size}:{info.mtime_ns}" + (f":{info.etag}" if info.etag else "") + link
            files.append(info.path)
    return identity, files


def fingerprint_of(key: Mapping[str, Any]) -> str:
    """The short hash a checkpoint folder is named after."""
    payload = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
