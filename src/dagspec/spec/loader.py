"""Loading a spec: YAML with positions -> PipelineSpec, with every problem located by file:line:col.

Loading is three passes: pydantic checks shape, types and bounds of the whole file; matrix stages
are expanded (``dagspec.spec.matrix``); then the checks that need the catalog of kinds (kinds,
params rendered with the params' defaults and a stand-in run context, inputs, references, cycles).
Every issue of a file is collected and reported at once.
"""

from __future__ import annotations

import graphlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from dagspec.errors import SpecIssue, SpecValidationError
from dagspec.kinds.base import InputRole, IOType, KindDef
from dagspec.kinds.catalog import Catalog, load_catalog, suggest
from dagspec.spec.exports import export_claims, overlap_issues
from dagspec.spec.matrix import expand
from dagspec.spec.models import ParamSpec, PipelineSpec, contains_template, parse_ref
from dagspec.spec.params import (
    StageParamsError,
    clean_location,
    describe_error,
    is_key_error,
    render_stage_params,
    stage_context,
    stage_param_issues,
    standin_context,
)
from dagspec.spec.partitions import PARTITIONS_PARAM, PartitionWindow
from dagspec.spec.yaml_source import Location, YamlDocument, dotted_location, load_yaml_file


class _IssueCollector:
    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.issues: list[SpecIssue] = []

    def add(self, location: Location, message: str, *, at_key: bool = False) -> None:
        line, col = self.doc.position(location, prefer_key=at_key)
        self.add_issue(SpecIssue(self.doc.file, line, col, dotted_location(location), message))

    def add_issue(self, issue: SpecIssue) -> None:
        # the expansions of a matrix stage often share a problem: said once, for the first of them
        words = issue.message.split(" (matrix ")[0]
        if not any(
            (i.line, i.column, i.location, i.message.split(" (matrix ")[0])
            == (issue.line, issue.column, issue.location, words)
            for i in self.issues
        ):
            self.issues.append(issue)

    def add_pydantic(self, errors: list[Any], prefix: Location, model: type[BaseModel]) -> None:
        for error in errors:
            loc = clean_location(error["loc"])
            self.add((*prefix, *loc), describe_error(error, model), at_key=is_key_error(error))


def spec_from_document(doc: YamlDocument, catalog: Catalog | None = None) -> PipelineSpec:
    """Validate a parsed YAML document into a PipelineSpec, raising SpecValidationError."""
    catalog = catalog or load_catalog()
    issues = _IssueCollector(doc)
    if not isinstance(doc.data, dict):
        issues.add((), "a spec must be a mapping with at least a 'stages' key")
        raise SpecValidationError(issues.issues)
    data = dict(doc.data)
    data.setdefault("dag_id", Path(doc.file).stem)
    try:
        written = PipelineSpec.model_validate({**data, "source": doc.file})
    except ValidationError as exc:
        issues.add_pydantic(exc.errors(), (), PipelineSpec)
        _check_stages_alone(data, issues, catalog)
        raise SpecValidationError(issues.issues) from None
    spec = _expanded(written, issues, catalog)
    _check_stages(spec, issues, catalog)
    _check_partitions(spec, issues)
    for issue in overlap_issues(export_claims(spec, catalog), across_files=False):
        issues.add_issue(issue)  # two stages of this spec publishing to one folder
    if issues.issues:
        raise SpecValidationError(issues.issues)
    return spec


def _expanded(written: PipelineSpec, issues: _IssueCollector, catalog: Catalog) -> PipelineSpec:
    """The spec with its matrix stages expanded, carrying the file's positions (for run-time errors)."""
    expansion = expand(written.stages, written.params, catalog)
    for problem in expansion.issues:
        issues.add(problem.location, problem.message)
    spec = written.model_copy(update={"stages": expansion.stages})
    spec._expansions = expansion.origins
    spec._matrix_params = expansion.params
    spec._positions = dict(issues.doc.value_positions)
    spec._key_positions = dict(issues.doc.key_positions)
    spec._stage_outputs = {}
    spec._input_types = {}
    return spec


def _check_stages_alone(data: dict[str, Any], issues: _IssueCollector, catalog: Catalog) -> None:
    """Stage-level checks even when a top-level key is wrong, so one run reports everything."""
    try:
        stages_only = PipelineSpec.model_validate(
            {"stages": data.get("stages"), "dag_id": "x", "source": issues.doc.file}
        )
    except ValidationError:
        return  # the stage errors are already among the top-level ones
    stages_only = stages_only.model_copy(update={"params": _usable_params(data)})
    _check_stages(_expanded(stages_only, issues, catalog), issues, catalog)


def _usable_params(data: dict[str, Any]) -> dict[str, ParamSpec]:
    """The params as written, a refused one kept with its default (so templates using it render)."""
    params = data.get("params")
    usable: dict[str, ParamSpec] = {}
    for name, raw in (params if isinstance(params, dict) else {}).items():
        try:
            usable[str(name)] = ParamSpec.model_validate(raw)
        except ValidationError:
            default = raw.get("default") if isinstance(raw, dict) else None
            usable[str(name)] = ParamSpec.model_construct(default=default)
    return usable


def _check_params(spec: PipelineSpec, name: str, kind: KindDef, issues: _IssueCollector) -> Mapping[str, IOType]:
    """Render the stage's params as a run with the defaults would, validate them; its outputs."""
    params = spec.stages[name].params
    try:
        model = render_stage_params(kind.params, params, stage_context(spec, name, standin_context(spec)))
    except StageParamsError as exc:
        for issue in stage_param_issues(spec, name, exc.problems):
            issues.add_issue(issue)
        return kind.output_types(None)
    if not contains_template(params):  # a run renders them to the same values (loaded_params)
        spec._loaded_params[name] = model
    if kind.check_inputs is not None:
        for field_name, message in kind.check_inputs(model, list(spec.stages[name].inputs)):
            issues.add(("stages", spec.written_stage(name), "params", field_name), message)
    # outputs that depend on templated params are known only at run time: the kind's defaults
    return kind.output_types(None if contains_template(params) else model)


def _check_stages(spec: PipelineSpec, issues: _IssueCollector, catalog: Catalog) -> None:
    outputs: dict[str, Mapping[str, IOType]] = {}
    kinds: dict[str, KindDef] = {}
    for name, stage in spec.stages.items():
        kind = catalog.get(stage.kind)
        if kind is None:
            issues.add(("stages", spec.written_stage(name), "kind"), catalog.unknown_message(stage.kind))
            continue
        kinds[name] = kind
        outputs[name] = _check_params(spec, name, kind, issues)
        spec._stage_outputs[name] = {output: type_.value for output, type_ in outputs[name].items()}

    for name, stage in spec.stages.items():
        kind = kinds.get(name)
        for role, ref in stage.inputs.items():
            loc: Location = ("stages", spec.written_stage(name), "inputs", role)
            if kind is not None and not kind.any_inputs and role not in kind.inputs:
                expected = ", ".join(kind.inputs) or "none"
                issues.add(
                    loc,
                    f"kind {kind.name!r} has no input {role!r}{suggest(role, list(kind.inputs))}; expected: {expected}",
                    at_key=True,
                )
                continue
            if isinstance(ref, str):
                _check_reference(spec, name, ref, loc, outputs, _input_role(kind, role), issues)
            elif isinstance(ref, PartitionWindow):
                _check_reference(spec, name, ref.stage, (*loc, "stage"), outputs, _input_role(kind, role), issues)
            elif (wanted := _input_role(kind, role)) is not None:  # checked with the folder (asset_links)
                spec._input_types[(name, role)] = wanted.type.value
        if kind is not None:
            for role, spec_role in kind.inputs.items():
                if spec_role.required and role not in stage.inputs:
                    issues.add(
                        ("stages", spec.written_stage(name), "inputs"), f"kind {kind.name!r} needs input {role!r}"
                    )

    graph = {
        name: {parse_ref(r)[0] for r in s.stage_refs().values() if parse_ref(r)[0] in spec.stages}
        for name, s in spec.stages.items()
    }
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        issues.add(("stages", spec.written_stage(cycle[0]), "inputs"), f"cycle between stages: {' -> '.join(cycle)}")


def _check_partitions(spec: PipelineSpec, issues: _IssueCollector) -> None:
    """Partitioned stages need the spec's ``partitions``; a window reads a partitioned stage's table
    from a stage that is not partitioned; a partitioned stage's files are read per partition only."""
    if spec.partitions is not None and PARTITIONS_PARAM in spec.params:
        issues.add(
            ("params", PARTITIONS_PARAM),
            f"param {PARTITIONS_PARAM!r} is dagspec's in a partitioned spec "
            "(which partitions a run computes): rename it",
            at_key=True,
        )
    of = spec.partitions.of if spec.partitions else None
    if of is not None and of not in spec.stages:
        issues.add(("partitions", "of"), f"unknown stage {of!r}{suggest(of, list(spec.stages))}")
        of = None
    elif of is not None and IOType.FILES.value not in {spec.output_type(of, o) for o in spec.outputs_of(of)}:
        issues.add(("partitions", "of"), f"stage {of!r} has no files output to list the partitions' files in")
        of = None
    for name, stage in spec.stages.items():
        written = spec.written_stage(name)
        reads = {parse_ref(ref)[0] for ref in stage.stage_refs().values()}
        if (
            stage.partitioned
            and of is not None
            and not any(spec.stages[r].partitioned for r in reads if r in spec.stages)
        ) and of not in reads:
            issues.add(
                ("stages", written, "inputs"),
                f"a partitioned stage whose partitions are files of {of!r} "
                f"(partitions.of) reads {of!r}: name it in inputs",
            )
        if stage.partitioned and spec.partitions is None:
            issues.add(
                ("stages", written, "partitioned"),
                "a partitioned stage needs the spec's `partitions:` ({files: GLOB} or {values: [...]})",
            )
        if stage.partitioned and spec.matrix_of(name):
            issues.add(("stages", written, "partitioned"), "a matrix stage cannot be partitioned")
        for role, ref in stage.stage_refs().items():
            upstream, output = parse_ref(ref)
            if upstream not in spec.stages:
                continue  # reported with the references
            loc: Location = ("stages", written, "inputs", role)
            window = stage.windows().get(role)
            if window is not None and not spec.stages[upstream].partitioned:
                issues.add(
                    loc,
                    f"a window reads the partitions of a partitioned stage; {upstream!r} is not partitioned "
                    f"(read it as {ref!r})",
                )
            elif window is not None and stage.partitioned:
                issues.add(
                    loc, f"a partitioned stage reads its own partition of {upstream!r}: give {ref!r}, not a window"
                )
            elif spec.stages[upstream].partitioned and not stage.partitioned:
                type_ = spec.output_type(upstream, output or next(iter(spec.outputs_of(upstream)), ""))
                if type_ is not None and type_ != IOType.TABLE.value:
                    issues.add(
                        loc,
                        f"{ref!r} is {type_} per partition of a partitioned stage: only tables of "
                        "several partitions can be read as one",
                    )


def _input_role(kind: KindDef | None, role: str) -> InputRole | None:
    """The declared role, or for ``any_inputs`` kinds with ``any_inputs_type`` a role of that type."""
    if kind is None:
        return None
    if role in kind.inputs:
        return kind.inputs[role]
    return InputRole(type=kind.any_inputs_type) if kind.any_inputs_type is not None else None


def _check_reference(
    spec: PipelineSpec,
    stage_name: str,
    ref: str,
    loc: Location,
    outputs: Mapping[str, Mapping[str, IOType]],
    role: Any,
    issues: _IssueCollector,
) -> None:
    upstream, output = parse_ref(ref)
    if upstream == stage_name:
        issues.add(loc, f"stage {stage_name!r} cannot read its own output")
        return
    if upstream not in spec.stages:
        issues.add(loc, f"unknown stage {upstream!r}{suggest(upstream, list(spec.stages))}")
        return
    available = outputs.get(upstream)
    if available is None:  # upstream kind unknown: already reported
        return
    if output is None:
        if len(available) > 1:
            names = ", ".join(available)
            issues.add(
                loc,
                f"stage {upstream!r} has several outputs ({names}); name one, e.g. "
                f"'{upstream}.{next(iter(available))}'",
            )
            return
        output = next(iter(available))
    elif len(available) == 1:
        issues.add(loc, f"stage {upstream!r} has a single output; refer to it as {upstream!r}, not {ref!r}")
        return
    elif output not in available:
        issues.add(
            loc,
            f"stage {upstream!r} has no output {output!r}{suggest(output, list(available))}; "
            f"outputs: {', '.join(available)}",
        )
        return
    if role is not None and available[output] != role.type:
        issues.add(loc, f"{ref!r} is {available[output].value} but this input expects {role.type.value}")


SPEC_SUFFIXES = (".yaml", ".yml")


def pipelines_dir(home: Path) -> Path:
    """$DAGSPEC_PIPELINES, else ``<home>/pipelines``."""
    return Path(os.environ.get("DAGSPEC_PIPELINES") or home / "pipelines")


def spec_files(folder: Path) -> list[Path]:
    """Every spec file of a folder, sorted."""
    return sorted(p for p in folder.glob("*") if p.suffix in SPEC_SUFFIXES and p.is_file())


def load_spec(path: str | Path, display_name: str | None = None, catalog: Catalog | None = None) -> PipelineSpec:
    """Load and fully validate one spec file; raises a SpecError listing every issue."""
    return spec_from_document(load_yaml_file(path, display_name), catalog)
