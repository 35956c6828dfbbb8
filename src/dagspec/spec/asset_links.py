"""Specs linked through their outputs: ``schedule: {assets: [...]}`` and stage inputs that read
another spec's output (``{spec: ..., output: ...}``), checked against the folder.

A spec alone cannot know whether ``ctr_ingest.features.data`` exists: that is a stage output of
another spec. So the specs read together (a folder, the DAG file's folder) are checked at once:
each listed asset must be an output of another of them (else ``file:line:col`` with "did you
mean"), and specs may not wait for each other in a cycle (none would ever run first; every one
of them is an error naming them all). A name whose spec is itself invalid is not reported: that
spec's own errors say what to fix. A spec read by another must keep its checkpoints under the same
storage root (the reader finds the upstream's ``_LATEST`` there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dagspec.errors import SpecIssue
from dagspec.kinds.catalog import suggest
from dagspec.spec.models import PipelineSpec
from dagspec.spec.schedule import AssetSchedule
from dagspec.spec.spec_input import SpecInput
from dagspec.spec.yaml_source import dotted_location


def asset_names(spec: PipelineSpec) -> list[str]:
    """The assets a spec's tasks emit: ``<dag_id>.<stage>.<output>`` for every stage output."""
    return [f"{spec.dag_id}.{stage}.{output}" for stage in spec.stages for output in spec.outputs_of(stage)]


def read_specs(spec: PipelineSpec) -> bool:
    """Does any stage of ``spec`` read another spec's output?"""
    return any(stage.spec_inputs() for stage in spec.stages.values())


def scheduled_assets(spec: PipelineSpec) -> list[str]:
    """The assets a spec's schedule waits for (none for a time or manual schedule)."""
    return list(spec.schedule.assets) if isinstance(spec.schedule, AssetSchedule) else []


@dataclass(frozen=True)
class _Link:
    """One listed asset: the spec that lists it, where, and the spec whose output it is."""

    downstream: str
    upstream: str
    issue_at: tuple[str, int, int, str]  # file, line, column, location


def asset_link_issues(
    specs: Mapping[Path, PipelineSpec], others: Iterable[PipelineSpec] = (), invalid_dag_ids: Iterable[str] = ()
) -> dict[Path, list[SpecIssue]]:
    """The issues of ``specs`` (path -> spec) whose schedule names unknown assets or closes a cycle.

    ``others`` are valid specs that count as upstreams but are not reported on (the rest of a
    folder); ``invalid_dag_ids`` are the dag_ids of specs that failed to load.
    """
    owners: dict[str, str] = {}
    by_dag_id: dict[str, PipelineSpec] = {}
    for spec in [*specs.values(), *others]:
        owners.update(dict.fromkeys(asset_names(spec), spec.dag_id))
        by_dag_id[spec.dag_id] = spec
    invalid = sorted(invalid_dag_ids, key=len, reverse=True)
    issues: dict[Path, list[SpecIssue]] = {}
    links: list[_Link] = []
    for path, spec in specs.items():
        for index, name in enumerate(scheduled_assets(spec)):
            location = ("schedule", "assets", index)
            line, column = spec.position(location)
            where = (spec.source, line, column, dotted_location(location))
            owner = owners.get(name)
            if owner == spec.dag_id:
                message = f"{name!r} is an output of this spec; a spec cannot be scheduled on its own outputs"
                issues.setdefault(path, []).append(SpecIssue(*where, message))
            elif owner is not None:
                links.append(_Link(spec.dag_id, owner, where))
            elif not any(name.startswith(f"{dag_id}.") for dag_id in invalid):
                issues.setdefault(path, []).append(SpecIssue(*where, _unknown(name, owners)))
    for path, spec in specs.items():
        found = _spec_input_issues(spec, owners, by_dag_id, invalid)
        if found:
            issues.setdefault(path, []).extend(found)
    paths = {spec.dag_id: path for path, spec in specs.items()}
    for cycle in _cycles(links):
        named = ", ".join(f"{link.downstream} ({_where(link)})" for link in cycle)
        message = f"specs scheduled on each other's outputs form a cycle, so none would run first: {named}"
        for link in cycle:
            if link.downstream in paths:
                issues.setdefault(paths[link.downstream], []).append(SpecIssue(*link.issue_at, message))
    return issues


def _spec_input_issues(
    spec: PipelineSpec, owners: Mapping[str, str], by_dag_id: Mapping[str, PipelineSpec], invalid: Sequence[str]
) -> list[SpecIssue]:
    """The stage inputs of ``spec`` that name no output of another spec of the folder, one kept
    under another storage root, or one of another type (table, files) than the input expects."""
    issues = []
    for name, stage in spec.stages.items():
        for role, ref in stage.spec_inputs().items():
            location = ("stages", spec.written_stage(name), "inputs", role)
            line, column = spec.position(location)
            where = (spec.source, line, column, dotted_location(location))
            owner = owners.get(ref.asset)
            if ref.spec == spec.dag_id:
                message = f"{ref.spec!r} is this spec: read its own stage output as {ref.output!r}"
            elif owner is None:
                if any(ref.asset.startswith(f"{dag_id}.") for dag_id in invalid):
                    continue
                message = _unknown(ref.asset, owners)
            elif by_dag_id[owner].storage.root != spec.storage.root:
                message = (
                    f"spec {owner!r} keeps its checkpoints under storage.root {by_dag_id[owner].storage.root!r}, "
                    f"this one under {spec.storage.root!r}; a spec reads another's output under the same storage root"
                )
            else:
                mismatch = _type_mismatch(spec, name, role, ref, by_dag_id[owner])
                if mismatch is None:
                    continue
                message = mismatch
            issues.append(SpecIssue(*where, message))
    return issues


def _type_mismatch(spec: PipelineSpec, stage: str, role: str, ref: SpecInput, upstream: PipelineSpec) -> str | None:
    """Why another spec's output cannot feed this input (a table where files are expected, or the
    reverse), or None when it fits or a type is not known."""
    found = upstream.output_type(ref.stage, ref.output_name)
    expected = spec.input_type(stage, role)
    if found is None or expected is None or found == expected:
        return None
    return (
        f"{ref.asset!r} is {found} (output {ref.output_name!r} of stage {ref.stage!r}, kind "
        f"{upstream.stages[ref.stage].kind!r}, in spec {ref.spec!r}) but input {role!r} of kind "
        f"{spec.stages[stage].kind!r} expects {expected}"
    )


def _unknown(name: str, owners: Mapping[str, str]) -> str:
    dag_id = name.rsplit(".", 2)[0]
    known = sorted(owners)
    if dag_id in owners.values():
        outputs = ", ".join(n for n in known if owners[n] == dag_id)
        return f"spec {dag_id!r} has no output {name!r}{suggest(name, known)}; its outputs: {outputs}"
    specs = ", ".join(sorted(set(owners.values()))) or "none"
    return (
        f"unknown asset {name!r}{suggest(name, known)}: no spec read with this one has dag_id {dag_id!r} "
        f"(an asset is '<dag_id>.<stage>.<output>' of another spec of the folder; specs: {specs})"
    )


def _where(link: _Link) -> str:
    file, line, column, _ = link.issue_at
    return f"{file}:{line}:{column}"


def _cycles(links: Sequence[_Link]) -> list[list[_Link]]:
    """The cycles of the graph spec -> the specs it waits for: per strongly connected component of
    two or more specs, one listed asset of each member that points into the component."""
    graph: dict[str, set[str]] = {}
    for link in links:
        graph.setdefault(link.downstream, set()).add(link.upstream)
        graph.setdefault(link.upstream, set())
    cycles = []
    for component in _components(graph):
        if len(component) < 2:
            continue
        members = sorted(component)
        cycles.append([next(k for k in links if k.downstream == m and k.upstream in component) for m in members])
    return cycles


def _components(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (a folder may hold many specs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found
