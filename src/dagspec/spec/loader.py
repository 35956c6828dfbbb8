"""Loading a spec: YAML with positions -> PipelineSpec, with every problem located by file:line:col.

Loading is two passes: pydantic checks shape, types and bounds of the whole file; then the
cross-field checks that need the catalog of kinds (kinds, params per kind, inputs, references,
cycles). Every issue of a file is collected and reported at once.
"""

from __future__ import annotations

import graphlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from dagspec.errors import SpecIssue, SpecValidationError
from dagspec.kinds.base import InputRole, IOType, KindDef, StageParams
from dagspec.kinds.catalog import Catalog, load_catalog, suggest
from dagspec.spec.models import PipelineSpec, contains_template, parse_ref
from dagspec.spec.templates import is_templated
from dagspec.spec.yaml_source import Location, YamlDocument, dotted_location, load_yaml_file


def validate_stage_params(kind: KindDef, params: Mapping[str, Any]) -> tuple[StageParams | None, list[ErrorDetails]]:
    """Validate params against the kind's model, tolerating Jinja strings rendered later.

    Returns the model (None when templates keep it from being built) and the errors that are
    real now: an error on a value that is a template is deferred to run time.
    """
    try:
        return kind.params.model_validate(dict(params)), []
    except ValidationError as exc:
        errors = [e for e in exc.errors() if not contains_template(e.get("input"))]
        errors = [e for e in errors if not _under_template(params, e["loc"])]
        return None, errors


def _under_template(params: Mapping[str, Any], loc: tuple[Any, ...]) -> bool:
    value: Any = params
    for part in loc:
        if is_templated(value):
            return True
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return False
    return contains_template(value)


def _message(error: Mapping[str, Any], known_fields: list[str]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(error["loc"][-1])
        return f"unknown key {key!r}{suggest(key, known_fields)}; expected one of: {', '.join(known_fields)}"
    if kind == "missing":
        return "required key is missing"
    msg = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if (isinstance(value, str | int | float | bool) or value is None) and repr(value) not in msg:
        msg += f" (got {value!r})"
    return msg


def _model_fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model that owns the last element of ``loc`` (for 'did you mean')."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            current = field.annotation if field else None
        elif getattr(current, "__origin__", None) is dict:
            current = current.__args__[1]
        else:
            return []
        # unwrap Optional[X] / X | None
        args = [a for a in getattr(current, "__args__", ()) if a is not type(None)]
        if getattr(current, "__origin__", None) is not dict and len(args) == 1:
            current = args[0]
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items() if not f.exclude]
    return []


class _IssueCollector:
    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.issues: list[SpecIssue] = []

    def add(self, location: Location, message: str, *, at_key: bool = False) -> None:
        line, col = self.doc.position(location, prefer_key=at_key)
        self.issues.append(SpecIssue(self.doc.file, line, col, dotted_location(location), message))

    def add_pydantic(self, errors: list[Any], prefix: Location, model: type[BaseModel]) -> None:
        for error in errors:
            loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            known = _model_fields_at(model, loc)
            self.add((*prefix, *loc), _message(error, known), at_key=error["type"] in ("extra_forbidden",))


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
        spec = PipelineSpec.model_validate({**data, "source": doc.file})
    except ValidationError as exc:
        issues.add_pydantic(exc.errors(), (), PipelineSpec)
        _check_stages_alone(data, issues, catalog)
        raise SpecValidationError(issues.issues) from None
    _check_stages(spec, issues, catalog)
    if issues.issues:
        raise SpecValidationError(issues.issues)
    return spec


def _check_stages_alone(data: dict[str, Any], issues: _IssueCollector, catalog: Catalog) -> None:
    """Stage-level checks even when a top-level key is wrong, so one run reports everything."""
    try:
        stages_only = PipelineSpec.model_validate({"stages": data.get("stages"), "dag_id": "x"})
    except ValidationError:
        return  # the stage errors are already among the top-level ones
    _check_stages(stages_only, issues, catalog)


def _check_stages(spec: PipelineSpec, issues: _IssueCollector, catalog: Catalog) -> None:
    outputs: dict[str, Mapping[str, IOType]] = {}
    kinds: dict[str, KindDef] = {}
    for name, stage in spec.stages.items():
        kind = catalog.get(stage.kind)
        if kind is None:
            issues.add(("stages", name, "kind"), catalog.unknown_message(stage.kind))
            continue
        kinds[name] = kind
        model, errors = validate_stage_params(kind, stage.params)
        issues.add_pydantic(errors, ("stages", name, "params"), kind.params)
        outputs[name] = kind.output_types(model)
        spec._stage_outputs[name] = tuple(outputs[name])

    for name, stage in spec.stages.items():
        kind = kinds.get(name)
        for role, ref in stage.inputs.items():
            loc: Location = ("stages", name, "inputs", role)
            if kind is not None and not kind.any_inputs and role not in kind.inputs:
                expected = ", ".join(kind.inputs) or "none"
                issues.add(
                    loc,
                    f"kind {kind.name!r} has no input {role!r}{suggest(role, list(kind.inputs))}; expected: {expected}",
                    at_key=True,
                )
                continue
            _check_reference(spec, name, ref, loc, outputs, _input_role(kind, role), issues)
        if kind is not None:
            for role, spec_role in kind.inputs.items():
                if spec_role.required and role not in stage.inputs:
                    issues.add(("stages", name, "inputs"), f"kind {kind.name!r} needs input {role!r}")

    graph = {
        name: {parse_ref(r)[0] for r in s.inputs.values() if parse_ref(r)[0] in spec.stages}
        for name, s in spec.stages.items()
    }
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        issues.add(("stages", cycle[0], "inputs"), f"cycle between stages: {' -> '.join(cycle)}")


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
