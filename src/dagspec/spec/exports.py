"""One folder per export: no two stages publish to one folder, or to folders inside each other.

An export replaces its folder whole (``dagspec.kinds.io.export``): of two stages publishing to one
folder, each run of one would replace the other's export, and an export inside another's folder
would be swept away when the outer one is replaced. So such stages are errors of both, within one
spec (``dagspec.spec.loader``) and across the specs read together (``dagspec.spec.together``),
each naming the other's file, line and field.

A folder is ``<storage.root>/exports/<path>`` as a run resolves it: the storage root as
``$DAGSPEC_STORAGE_ROOT`` or the spec gives it (a relative one against the project), the path
rendered as ``dagspec validate`` renders it, with the params' defaults. A path templated by params
is therefore compared at the defaults only; runs with other values are not known before they start.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from dagspec import checkpoint
from dagspec.errors import SpecIssue
from dagspec.kinds.catalog import Catalog
from dagspec.spec.models import PipelineSpec, contains_template
from dagspec.spec.params import StageParamsError, render_stage_params, stage_context, standin_context
from dagspec.spec.roots import STORAGE_ROOT_ENV, root_path


def storage_root(spec: PipelineSpec, home: Path | None = None, override: str | None = None) -> str:
    """The absolute storage root: ``override`` or $DAGSPEC_STORAGE_ROOT, else the spec's."""
    return root_path(override or os.environ.get(STORAGE_ROOT_ENV) or spec.storage.root, home)


@dataclass(frozen=True)
class ExportClaim:
    """The folder one stage publishes to, and where its spec says so."""

    file: str
    stage: str  # the stage's name (a matrix expansion's own)
    written: str  # the stage as written in the file
    field: str  # stages.<stage>.params.<field>
    line: int
    column: int
    path: str  # relative to the exports folder
    target: str  # <root>/exports/<path>
    templated: bool

    def issue(self, message: str) -> SpecIssue:
        """An issue of this claim's spec, at its field."""
        return SpecIssue(self.file, self.line, self.column, self.field, message)


def export_claims(spec: PipelineSpec, catalog: Catalog, home: Path | None = None) -> list[ExportClaim]:
    """The folders a spec's stages publish to, at the params' defaults (a stage whose params
    fail is left out: its own error says why)."""
    claims = []
    context = standin_context(spec)
    for name, stage in spec.stages.items():
        kind = catalog.get(stage.kind)
        if kind is None or kind.publishes is None:
            continue
        try:
            params = render_stage_params(kind.params, stage.params, stage_context(spec, name, context))
        except StageParamsError:
            continue
        path = kind.published_path(params)
        if not path:
            continue
        location = ("stages", spec.written_stage(name), "params", kind.publishes)
        line, column = spec.position(location)
        target = checkpoint.export_target(storage_root(spec, home), path)
        templated = contains_template(stage.params.get(kind.publishes))
        claims.append(
            ExportClaim(spec.source, name, location[1], ".".join(location), line, column, path, target, templated)
        )
    return claims


def _inside(inner: str, outer: str) -> bool:
    return inner.startswith(outer.rstrip("/") + "/")


def overlapping(claims: list[ExportClaim]) -> list[tuple[ExportClaim, ExportClaim]]:
    """Every pair of claims whose folders are one, or one inside the other."""
    pairs = []
    for a, b in combinations(claims, 2):
        first, second = posixpath.normpath(a.target), posixpath.normpath(b.target)
        if first == second or _inside(first, second) or _inside(second, first):
            pairs.append((a, b))
    return pairs


def overlap_message(claim: ExportClaim, other: ExportClaim) -> str:
    """What ``claim``'s spec is told about ``other``, which publishes to its folder or beside it."""
    same_root = claim.target.removesuffix(claim.path) == other.target.removesuffix(other.path)
    mine, theirs = (claim.path, other.path) if same_root else (claim.target, other.target)
    mine += " (at the params' defaults)" if claim.templated else ""
    theirs += " (at the params' defaults)" if other.templated else ""
    if claim.file == other.file and claim.written == other.written:
        first, second = sorted((claim.stage, other.stage))  # one message for both: said once
        return (
            f"the expansions {first!r} and {second!r} of this matrix stage both publish to {mine}: "
            "put a {{ matrix.NAME }} in the path, so that each publishes to a folder of its own"
        )
    who = f"{other.file}:{other.line}:{other.column} {other.field}"
    if posixpath.normpath(claim.target) == posixpath.normpath(other.target):
        where = f"publishes to {mine}, as {who} does: each run of one would replace the other's export"
    elif _inside(posixpath.normpath(claim.target), posixpath.normpath(other.target)):
        where = (
            f"publishes to {mine}, inside {theirs}, where {who} publishes: publishing that one would "
            "delete this export, and this one would write into it"
        )
    else:
        where = (
            f"publishes to {mine}, which holds {theirs}, where {who} publishes: publishing this one would "
            "delete that export, and that one would write into this one"
        )
    return f"{where}; give each export a folder of its own, outside the others'"


def overlap_issues(claims: list[ExportClaim], *, across_files: bool) -> list[SpecIssue]:
    """An issue of each claim whose folder is another's or nested with it: of another file
    (``across_files``), else of its own."""
    issues = []
    for a, b in overlapping(claims):
        if (a.file != b.file) == across_files:
            issues += [a.issue(overlap_message(a, b)), b.issue(overlap_message(b, a))]
    return issues
