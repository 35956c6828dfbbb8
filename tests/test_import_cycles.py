"""No import cycles between dagspec's modules (lazy and TYPE_CHECKING imports included), no name-built imports."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import grimp

import dagspec


def test_dagspec_has_no_import_cycle() -> None:
    graph = grimp.build_graph("dagspec", exclude_type_checking_imports=False)
    sorter = graphlib.TopologicalSorter({m: graph.find_modules_directly_imported_by(m) for m in graph.modules})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def _built_name(node: ast.expr) -> bool:
    """An import target computed from a formatted string: an f-string, ``+``, ``%`` or ``.format()``."""
    if isinstance(node, ast.JoinedStr | ast.BinOp):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"


def _name_built_imports(source: str, shown_as: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__") and _built_name(node.args[0]):
            found.append(f"{shown_as}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_is_imported_by_a_name_built_at_run_time() -> None:
    """Linters, import contracts and the cache key see only static imports (a registry, not a format)."""
    src = Path(dagspec.__file__).parent
    found = [hit for path in sorted(src.rglob("*.py")) for hit in _name_built_imports(path.read_text(), str(path))]
    assert found == []


def test_the_name_built_import_check_catches_each_form() -> None:
    source = (
        'importlib.import_module(f"dagspec.kinds.scoring.flavor_{name}")\n'
        'import_module("dagspec.x_" + name)\n'
        '__import__("pkg.{}".format(name))\n'
        'importlib.import_module("dagspec.kinds.io.read")\n'
        "importlib.import_module(name)\n"
    )
    assert [hit.split(": ", 1)[0] for hit in _name_built_imports(source, "m.py")] == ["m.py:1", "m.py:2", "m.py:3"]
