"""No import cycles between dagspec's modules, lazy (in-function) and TYPE_CHECKING imports included."""

from __future__ import annotations

import graphlib

import grimp


def test_dagspec_has_no_import_cycle() -> None:
    graph = grimp.build_graph("dagspec", exclude_type_checking_imports=False)
    sorter = graphlib.TopologicalSorter({m: graph.find_modules_directly_imported_by(m) for m in graph.modules})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
