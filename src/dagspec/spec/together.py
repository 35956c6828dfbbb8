"""Specs read together (a folder, the files given to ``validate``): each needs its own ``dag_id``,
and an asset schedule must name outputs of the others (``dagspec.spec.asset_links``).

Airflow knows a DAG by its id only: of two specs with one ``dag_id`` it would keep one, and a
run, a trigger or ``dagspec run`` of the other would run the wrong pipeline. So a shared
``dag_id`` is an error of every spec that has it, naming the others and where they say so.
The ``dag_id`` a file asks for is read from its YAML alone (its stem when it has none), so a
copy still being edited, invalid in other ways, counts too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dagspec.errors import SpecError, SpecIssue, SpecValidationError
from dagspec.kinds.catalog import Catalog, load_catalog
from dagspec.spec.asset_links import asset_link_issues, read_specs, scheduled_assets
from dagspec.spec.exports import export_claims, overlap_issues
from dagspec.spec.loader import spec_from_document
from dagspec.spec.models import PipelineSpec
from dagspec.spec.yaml_source import YamlDocument, load_yaml_file


@dataclass(frozen=True)
class DagIdClaim:
    """The ``dag_id`` one spec file asks for, and where (line 1, column 1 when it is the stem)."""

    path: Path
    file: str
    dag_id: str
    line: int
    column: int
    from_stem: bool

    @property
    def where(self) -> str:
        """``file:line:col``, as in every spec error."""
        return f"{self.file}:{self.line}:{self.column}"


def dag_id_claim(path: Path, doc: YamlDocument) -> DagIdClaim | None:
    """The ``dag_id`` a parsed file asks for (None: the file is no mapping or its dag_id no string)."""
    if not isinstance(doc.data, dict):
        return None
    dag_id = doc.data.get("dag_id", Path(doc.file).stem)
    if not isinstance(dag_id, str):
        return None  # the file's own validation says what is wrong with it
    from_stem = "dag_id" not in doc.data
    line, column = (1, 1) if from_stem else doc.position(("dag_id",))
    return DagIdClaim(path.resolve(), doc.file, dag_id, line, column, from_stem)


def shared_dag_id_issues(claims: Sequence[DagIdClaim]) -> dict[Path, list[SpecIssue]]:
    """For every file whose ``dag_id`` another file of ``claims`` has too: one issue naming them."""
    by_id: dict[str, list[DagIdClaim]] = {}
    for claim in claims:
        if all(claim.path != other.path for other in by_id.get(claim.dag_id, [])):
            by_id.setdefault(claim.dag_id, []).append(claim)
    issues: dict[Path, list[SpecIssue]] = {}
    for group in by_id.values():
        for claim in group if len(group) > 1 else []:
            others = ", ".join(o.where + (" (its file name)" if o.from_stem else "") for o in group if o is not claim)
            named = f"{claim.dag_id!r}" + (" (the file name)" if claim.from_stem else "")
            message = f"{named} is also the dag_id of {others}; each spec needs its own dag_id"
            issues[claim.path] = [SpecIssue(claim.file, claim.line, claim.column, "dag_id", message)]
    return issues


def claims_of(paths: Sequence[Path], display: Callable[[Path], str]) -> list[DagIdClaim]:
    """The claims of spec files from their YAML alone (a file whose YAML fails claims nothing)."""
    claims = []
    for path in paths:
        try:
            claim = dag_id_claim(path, load_yaml_file(path, display(path)))
        except (SpecError, OSError):
            continue
        if claim is not None:
            claims.append(claim)
    return claims


@dataclass(frozen=True)
class LoadedSpec:
    """One file of specs read together: its spec, or every error of it (a shared dag_id included)."""

    path: Path
    file: str
    spec: PipelineSpec | None = None
    error: SpecError | None = None


def load_specs(
    paths: Sequence[Path],
    display: Callable[[Path], str],
    *,
    neighbours: Sequence[Path] = (),
    catalog: Catalog | None = None,
    home: Path | None = None,
) -> list[LoadedSpec]:
    """Load specs that are read together, each fully; a ``dag_id`` two of them share fails both,
    and so does an export folder (``dagspec.spec.exports``).

    ``neighbours`` are files whose ``dag_id`` and exports count but which are not loaded (the other
    specs of a folder Airflow parses with the given ones). ``home`` is the project relative storage
    roots are under (default: ``$DAGSPEC_HOME`` or the current directory). Anything a file raises
    while loading, a bug of ours included, becomes that file's error: one file never stops the others.
    """
    catalog = catalog or load_catalog()
    docs: dict[Path, YamlDocument | SpecError] = {}
    claims: list[DagIdClaim] = []
    for path in paths:
        try:
            doc = load_yaml_file(path, display(path))
        except SpecError as exc:
            docs[path] = exc
            continue
        except Exception as exc:  # an unreadable file, or a bug of ours: that file's error, never the others'
            docs[path] = crash_error(display(path), exc)
            continue
        docs[path] = doc
        claim = dag_id_claim(path, doc)
        claims += [claim] if claim else []
    read = {path.resolve() for path in docs}
    others = [p for p in neighbours if p.resolve() not in read]
    shared = shared_dag_id_issues(claims + claims_of(others, display))
    results: dict[Path, PipelineSpec | SpecError] = {}
    for path, parsed in docs.items():
        try:
            results[path] = parsed if isinstance(parsed, SpecError) else spec_from_document(parsed, catalog)
        except SpecError as exc:
            results[path] = exc
        except Exception as exc:  # one spec must never take the others down, whatever it raises
            results[path] = crash_error(display(path), exc)
    neighbour_specs, invalid = _load_neighbours(others, display, catalog)
    specs = [spec for spec in results.values() if isinstance(spec, PipelineSpec)]
    exported = _export_overlaps(specs + neighbour_specs, catalog, home)
    loaded = []
    for path, result in results.items():
        file = display(path)
        issues = shared.get(path.resolve(), [])
        if isinstance(result, PipelineSpec):
            issues = issues + exported.get(file, [])
            failed = LoadedSpec(path, file, error=SpecValidationError(issues)) if issues else None
            loaded.append(failed or LoadedSpec(path, file, spec=result))
        else:
            loaded.append(
                LoadedSpec(path, file, error=SpecValidationError(result.issues + issues) if issues else result)
            )
    return _with_asset_links(loaded, neighbour_specs, invalid, display)


def _load_neighbours(
    paths: Sequence[Path], display: Callable[[Path], str], catalog: Catalog
) -> tuple[list[PipelineSpec], list[str]]:
    """The neighbours that load, and the dag_ids of those that do not (their own errors are
    reported when they are read themselves)."""
    specs: list[PipelineSpec] = []
    invalid: list[str] = []
    for path in paths:
        try:
            specs.append(spec_from_document(load_yaml_file(path, display(path)), catalog))
        except Exception:  # whatever it is, it is that file's own error
            invalid += [claim.dag_id for claim in claims_of([path], display)]
    return specs, invalid


def _export_overlaps(specs: Sequence[PipelineSpec], catalog: Catalog, home: Path | None) -> dict[str, list[SpecIssue]]:
    """file -> the issues of its stages publishing to another spec's export folder (or one nested with it)."""
    claims = [claim for spec in specs for claim in export_claims(spec, catalog, home)]
    issues: dict[str, list[SpecIssue]] = {}
    for issue in overlap_issues(claims, across_files=True):
        issues.setdefault(issue.file, []).append(issue)
    return issues


def _with_asset_links(
    loaded: list[LoadedSpec], neighbours: Sequence[PipelineSpec], invalid: list[str], display: Callable[[Path], str]
) -> list[LoadedSpec]:
    """``loaded`` with the specs whose asset schedule or spec input names an unknown output, or whose
    schedule closes a cycle, failed (``dagspec.spec.asset_links``); the neighbours count as upstreams."""
    valid = {item.path: item.spec for item in loaded if item.spec is not None}
    if not any(scheduled_assets(spec) or read_specs(spec) for spec in valid.values()):
        return loaded
    invalid = invalid + [claim.dag_id for claim in claims_of([i.path for i in loaded if i.spec is None], display)]
    issues = asset_link_issues(valid, list(neighbours), invalid)
    return [
        LoadedSpec(item.path, item.file, error=SpecValidationError(issues[item.path])) if item.path in issues else item
        for item in loaded
    ]


def crash_error(file: str, exc: BaseException) -> SpecError:
    """An unexpected exception while loading or compiling a spec, as that file's error."""
    message = f"cannot be loaded: {type(exc).__name__}: {str(exc)[:500]}"
    return SpecValidationError([SpecIssue(file, 1, 1, "", message)])
