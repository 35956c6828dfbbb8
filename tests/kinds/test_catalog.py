"""The catalog: every kind resolves; a user's kind in plugins/ or behind an entry point has the same shape."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dagspec.kinds.base import KindDef, StageParams
from dagspec.kinds.catalog import BUILTIN_MODULES, build_catalog, load_catalog
from tests.conftest import REPO

USER_KIND = '''
"""A user's kind: add a constant column."""
from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, StageParams, kind


class AddColumnParams(StageParams):
    """Add a column holding one value."""

    name: str
    value: int = 0


@kind("add_column", params=AddColumnParams, inputs={"data": TABLE})
def add_column(inputs: Inputs, params: AddColumnParams, ctx: StageContext) -> Outputs:
    """Add a constant integer column to a table."""
    from pyspark.sql import functions as F

    return {"data": inputs["data"].withColumn(params.name, F.lit(params.value))}
'''


def test_every_builtin_kind_resolves_to_a_function_a_params_model_and_a_description() -> None:
    catalog = build_catalog(REPO)
    assert catalog.errors == []
    assert len(catalog.kinds) == 22  # 19 before check and gate, 21 before train_vw
    assert {k.module for k in catalog.all()} == set(BUILTIN_MODULES)
    for definition in catalog.all():
        assert isinstance(definition, KindDef)
        assert callable(definition.function) and definition.function.__name__
        assert issubclass(definition.params, StageParams)
        assert definition.description and not definition.description.endswith(" ")
        assert catalog.origins[definition.name] == "dagspec"
        assert Path(catalog.files[definition.name]).is_file()


def test_a_plugin_module_is_discovered_with_its_origin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "team_kinds.py").write_text(USER_KIND)
    (plugins / "broken_kinds.py").write_text("raise RuntimeError('boom')\n")
    (plugins / "_private.py").write_text("raise RuntimeError('never imported')\n")
    monkeypatch.setenv("DAGSPEC_PLUGINS", str(plugins))
    monkeypatch.syspath_prepend(str(plugins))
    catalog = build_catalog(tmp_path)
    assert catalog.origins["add_column"] == "plugin team_kinds.py"
    assert catalog.get("add_column").description == "Add a constant integer column to a table."
    assert catalog.errors == ["broken_kinds.py: RuntimeError: boom"]
    assert "read" in catalog.kinds  # a broken plugin hides nothing else
    assert "plugins that failed to import: broken_kinds.py" in catalog.unknown_message("nope")


def test_an_entry_point_package_is_discovered(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "acme_kinds").mkdir(parents=True)
    (site / "acme_kinds" / "__init__.py").write_text(USER_KIND)
    dist = site / "acme_kinds-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-kinds\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[dagspec.kinds]\nacme = acme_kinds\n")
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(site)!r})
        from pathlib import Path
        from dagspec.kinds.catalog import build_catalog
        catalog = build_catalog(Path({str(tmp_path)!r}))
        print(catalog.origins["add_column"], catalog.errors)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "entry point acme (acme_kinds) []"


def test_the_catalog_is_built_once_per_project() -> None:
    assert load_catalog(REPO) is load_catalog(REPO)
