"""Matrix fan-out: a stage with ``matrix: {name: [values...]}`` becomes one stage per combination.

- An expansion is named ``<stage>__<value>[__<value>...]``, the values in the matrix's key order
  with every character outside ``[A-Za-z0-9_-]`` replaced by ``_`` (``few__3``,
  ``train__xgb_single__10000``). That name is its task_id, its checkpoint folder and what
  ``{{ matrix.<name> }}`` values it renders with are recorded for.
- A stage reading a matrix stage inherits its matrix: one expansion per combination, each wired
  to the upstream expansion with the same values. Keys inherited from several inputs must carry
  the same values; a stage's own matrix adds keys (the product of both).
- A ``fan_in`` kind (``compare``, ``report``) reading a matrix stage takes every expansion: input
  role ``r`` becomes ``r__<values>`` (``evals__10000``), one per expansion.
- Values are literals or ``'{{ params.NAME }}'``: that param's default (a list). The DAG's shape is
  fixed when the spec is parsed, so a run may not change such a param (``resolve`` refuses it).
"""

from __future__ import annotations

import graphlib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dagspec.kinds.catalog import Catalog
from dagspec.spec.models import MAX_TASK_ID_LENGTH, Location, MatrixValue, ParamSpec, StageSpec, parse_ref
from dagspec.spec.partitions import PartitionWindow
from dagspec.spec.spec_input import SpecInput

SEPARATOR = "__"
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PARAM_REF = re.compile(r"^\s*\{\{\s*params\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class MatrixIssue:
    """A problem of a matrix, at a location of the file as written."""

    location: Location
    message: str


@dataclass
class Expansion:
    """The written stages expanded: stages in file order, and where each expansion comes from."""

    stages: dict[str, StageSpec]
    origins: dict[str, tuple[str, dict[str, MatrixValue]]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # param -> default, for params that shape a matrix
    issues: list[MatrixIssue] = field(default_factory=list)


def value_slug(value: MatrixValue) -> str:
    """A matrix value as it appears in a task id."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return _UNSAFE.sub("_", text) or "_"


def combination_suffix(values: Mapping[str, MatrixValue]) -> str:
    """``{"engine": "lr", "size": 10}`` -> ``lr__10``."""
    return SEPARATOR.join(value_slug(v) for v in values.values())


def expansion_name(stage: str, values: Mapping[str, MatrixValue]) -> str:
    """The task id of one expansion of ``stage``."""
    return f"{stage}{SEPARATOR}{combination_suffix(values)}"


def expand(stages: Mapping[str, StageSpec], params: Mapping[str, ParamSpec], catalog: Catalog) -> Expansion:
    """Expand every matrix stage and every stage that inherits a matrix; problems become issues."""
    result = Expansion(stages=dict(stages))
    if all(stage.matrix is None for stage in stages.values()):
        return result
    graph = {name: {parse_ref(r)[0] for r in s.stage_refs().values()} & set(stages) for name, s in stages.items()}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError:
        return result  # the loader reports the cycle by name
    matrices: dict[str, dict[str, list[MatrixValue]]] = {}
    expanded: dict[str, list[tuple[str, StageSpec]]] = {}
    for name in order:
        stage = stages[name]
        kind = catalog.get(stage.kind)
        fan_in = kind.fan_in if kind is not None else False
        matrix = _inherited(name, stage, matrices, fan_in, result.issues)
        for key, values in _own_matrix(name, stage, params, result).items():
            if key in matrix:
                result.issues.append(
                    MatrixIssue(("stages", name, "matrix", key), f"matrix key {key!r} is also inherited from an input")
                )
            matrix[key] = values
        matrices[name] = matrix
        expanded[name] = _expansions(name, stage, matrix, matrices, fan_in, result)
    written = set(stages)
    seen: dict[str, str] = {}
    result.stages = {}
    for name in stages:  # file order
        for new_name, new_stage in expanded[name]:
            other = seen.get(new_name) or (new_name if new_name in written and new_name != name else None)
            if other is not None:
                result.issues.append(
                    MatrixIssue(("stages", name), f"expansion {new_name!r} collides with stage {other!r}; rename one")
                )
                continue
            if len(new_name) > MAX_TASK_ID_LENGTH:
                result.issues.append(
                    MatrixIssue(
                        ("stages", name, "matrix"),
                        f"expansion {new_name[:40]!r}... is {len(new_name)} characters long; Airflow's task ids "
                        f"take at most {MAX_TASK_ID_LENGTH}",
                    )
                )
            seen[new_name] = name
            result.stages[new_name] = new_stage
    return result


def _inherited(
    name: str,
    stage: StageSpec,
    matrices: Mapping[str, dict[str, list[MatrixValue]]],
    fan_in: bool,
    issues: list[MatrixIssue],
) -> dict[str, list[MatrixValue]]:
    if fan_in:
        return {}
    matrix: dict[str, list[MatrixValue]] = {}
    origin: dict[str, str] = {}
    for role, ref in stage.stage_refs().items():
        upstream = parse_ref(ref)[0]
        for key, values in matrices.get(upstream, {}).items():
            if key in matrix and matrix[key] != values:
                issues.append(
                    MatrixIssue(
                        ("stages", name, "inputs", role),
                        f"inherits matrix key {key!r} = {values} from {upstream!r} but {matrix[key]} from "
                        f"{origin[key]!r}; the values must be the same",
                    )
                )
                continue
            matrix[key], origin[key] = values, upstream
    return matrix


def _own_matrix(
    name: str, stage: StageSpec, params: Mapping[str, ParamSpec], result: Expansion
) -> dict[str, list[MatrixValue]]:
    if stage.matrix is None:
        return {}
    if not stage.matrix:
        result.issues.append(MatrixIssue(("stages", name, "matrix"), "a matrix needs at least one key"))
    own: dict[str, list[MatrixValue]] = {}
    for key, given in stage.matrix.items():
        loc: Location = ("stages", name, "matrix", key)
        if not _KEY.match(key):
            result.issues.append(MatrixIssue(loc, f"matrix key {key!r} must be an identifier ({{{{ matrix.KEY }}}})"))
            continue
        values = _values(given, params, loc, result)
        if values is None:
            continue
        slugs = [value_slug(v) for v in values]
        if not values:
            result.issues.append(MatrixIssue(loc, "a matrix key needs at least one value"))
        elif len(set(slugs)) != len(slugs):
            result.issues.append(MatrixIssue(loc, f"values {values} are not distinct in task ids ({', '.join(slugs)})"))
        else:
            own[key] = values
    return own


def _values(given: Any, params: Mapping[str, ParamSpec], loc: Location, result: Expansion) -> list[MatrixValue] | None:
    if isinstance(given, list):
        return list(given)
    match = _PARAM_REF.match(given)
    if match is None:
        result.issues.append(
            MatrixIssue(loc, f"a matrix entry is a list of values or '{{{{ params.NAME }}}}', got {given!r}")
        )
        return None
    param = params.get(match["name"])
    if param is None:
        known = ", ".join(params) or "none"
        result.issues.append(MatrixIssue(loc, f"unknown param {match['name']!r} (params: {known})"))
        return None
    default = param.default
    if not isinstance(default, list) or not all(isinstance(v, str | int | float | bool) for v in default):
        result.issues.append(
            MatrixIssue(loc, f"param {match['name']!r} must default to a list of strings or numbers, got {default!r}")
        )
        return None
    result.params[match["name"]] = default
    return list(default)


def _expansions(
    name: str,
    stage: StageSpec,
    matrix: Mapping[str, list[MatrixValue]],
    matrices: Mapping[str, dict[str, list[MatrixValue]]],
    fan_in: bool,
    result: Expansion,
) -> list[tuple[str, StageSpec]]:
    combinations = [dict(zip(matrix, combo, strict=True)) for combo in itertools.product(*matrix.values())]
    if not combinations:  # an empty key list was reported; keep the stage so other checks still run
        combinations = [{}]
    out = []
    for values in combinations:
        # another spec's output, a window of a partitioned stage (never a matrix stage): as written
        inputs: dict[str, str | SpecInput | PartitionWindow] = {**stage.spec_inputs(), **stage.windows()}
        for role, ref in stage.stage_refs().items():
            if role in inputs:
                continue
            upstream, output = parse_ref(ref)
            upstream_matrix = matrices.get(upstream, {})
            tail = f".{output}" if output else ""
            if not upstream_matrix:
                inputs[role] = ref
            elif fan_in:
                for combo in itertools.product(*upstream_matrix.values()):
                    each = dict(zip(upstream_matrix, combo, strict=True))
                    inputs[f"{role}{SEPARATOR}{combination_suffix(each)}"] = expansion_name(upstream, each) + tail
            else:
                # a value the upstream lacks comes from a conflict already reported: wire to its first
                wired = {k: values[k] if values[k] in vs else vs[0] for k, vs in upstream_matrix.items()}
                inputs[role] = expansion_name(upstream, wired) + tail
        new_name = expansion_name(name, values) if values else name
        out.append((new_name, stage.model_copy(update={"inputs": inputs, "matrix": None})))
        if values:
            result.origins[new_name] = (name, values)
    return out
