"""Every stage kind dagspec can run: the built-in ones, the project's ``plugins/`` and entry points.

The catalog imports kind modules and collects the functions ``@kind`` marked; kind modules never
import the catalog, so there is no cycle. A user's kind has exactly the shape of a built-in one:
a module with a params model and a decorated function, either

- a ``.py`` file in the project's ``plugins/`` folder (Airflow's plugins folder), imported under
  its file name with that folder on ``sys.path``, or
- any module named by an entry point of the group ``dagspec.kinds`` in an installed package.

The DAG file, the CLI and the Spark job all build the catalog the same way, so they agree on
what a kind name means.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from dagspec.kinds.base import KindDef, kind_of
from dagspec.kinds.base import suggest as suggest
from dagspec.storage import project_home

ENTRY_POINT_GROUP = "dagspec.kinds"
BUILTIN_MODULES: tuple[str, ...] = (
    "dagspec.kinds.io.read",
    "dagspec.kinds.io.export",
    "dagspec.kinds.transform.sql",
    "dagspec.kinds.sampling.undersample",
    "dagspec.kinds.sampling.split",
    "dagspec.kinds.sampling.sample",
    "dagspec.kinds.physics.generate_events",
    "dagspec.kinds.physics.hep_event_features",
    "dagspec.kinds.physics.topology_features",
    "dagspec.kinds.ctr.generate_logs",
    "dagspec.kinds.ctr.read_criteo",
    "dagspec.kinds.ctr.features",
    "dagspec.kinds.ctr.report",
    "dagspec.kinds.training.train_keras",
    "dagspec.kinds.training.train_xgboost",
    "dagspec.kinds.training.train_spark_ml",
    "dagspec.kinds.training.train_vw",
    "dagspec.kinds.scoring.predict",
    "dagspec.kinds.scoring.evaluate",
    "dagspec.kinds.scoring.compare",
    "dagspec.kinds.quality.check",
    "dagspec.kinds.quality.gate",
)


@dataclass
class Catalog:
    """Kinds by name, where each came from, and the user modules that failed to import."""

    kinds: dict[str, KindDef] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def get(self, name: str) -> KindDef | None:
        """The kind registered under ``name`` or one of its aliases."""
        return self.kinds.get(self.aliases.get(name, name))

    def names(self) -> list[str]:
        """Sorted names of every kind."""
        return sorted(self.kinds)

    def all(self) -> list[KindDef]:
        """Every kind, sorted by name."""
        return [self.kinds[n] for n in self.names()]

    def unknown_message(self, name: str) -> str:
        """Why ``name`` is not a kind, with a 'did you mean' and failed plugin imports."""
        message = f"unknown stage kind {name!r}{suggest(name, self.names())}; known kinds: {', '.join(self.names())}"
        if self.errors:
            message += "; plugins that failed to import: " + "; ".join(self.errors)
        return message

    def add_module(self, module: ModuleType, origin: str) -> None:
        """Collect the kinds a module defines (not those it imports from elsewhere)."""
        source = getattr(module, "__file__", None) or ""
        for value in list(vars(module).values()):
            definition = kind_of(value)
            if definition is None or definition.module != module.__name__:
                continue
            self.add(definition, origin, source)

    def add(self, definition: KindDef, origin: str, source: str = "") -> None:
        """Register one kind; a second kind under a taken name is an error of its origin."""
        taken = self.kinds.get(definition.name)
        if taken is not None and taken is not definition:
            self.errors.append(
                f"{origin}: kind {definition.name!r} is already defined by {self.origins[definition.name]}"
            )
            return
        self.kinds[definition.name] = definition
        self.origins[definition.name] = origin
        self.files[definition.name] = source
        for alias in definition.aliases:
            self.aliases[alias] = definition.name


def plugins_dir(home: Path) -> Path:
    """$DAGSPEC_PLUGINS, else ``<home>/plugins`` (the folder Airflow also reads plugins from)."""
    return Path(os.environ.get("DAGSPEC_PLUGINS") or home / "plugins")


def plugin_modules(folder: Path) -> list[Path]:
    """The user kind modules of a plugins folder: its top-level ``*.py`` files not starting with '_'."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def _import_plugin(path: Path) -> ModuleType:
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.append(folder)
    return importlib.import_module(path.stem)


def build_catalog(home: Path) -> Catalog:
    """Import the built-in kinds, the plugins folder of ``home`` and the ``dagspec.kinds`` entry points."""
    catalog = Catalog()
    for name in BUILTIN_MODULES:
        catalog.add_module(importlib.import_module(name), "dagspec")
    for path in plugin_modules(plugins_dir(home)):
        origin = f"plugin {path.name}"
        try:
            catalog.add_module(_import_plugin(path), origin)
        except Exception as exc:  # a user's broken module must not hide every other kind
            catalog.errors.append(f"{path.name}: {type(exc).__name__}: {exc}")
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        origin = f"entry point {entry.name} ({entry.value})"
        try:
            loaded = entry.load()
        except Exception as exc:  # a broken entry point, whatever it raises, must not hide every other kind
            catalog.errors.append(f"{origin}: {type(exc).__name__}: {exc}")
            continue
        if isinstance(loaded, ModuleType):
            catalog.add_module(loaded, origin)
        elif (definition := kind_of(loaded)) is not None:
            catalog.add(definition, origin, getattr(sys.modules.get(definition.module), "__file__", "") or "")
    return catalog


_CATALOGS: dict[Path, Catalog] = {}


def load_catalog(home: Path | None = None) -> Catalog:
    """The catalog of a project (cached per process: modules are imported once)."""
    key = (home or project_home()).resolve()
    if key not in _CATALOGS:
        _CATALOGS[key] = build_catalog(key)
    return _CATALOGS[key]


def get_kind(name: str, home: Path | None = None) -> KindDef | None:
    """The kind called ``name`` in the project's catalog."""
    return load_catalog(home).get(name)
