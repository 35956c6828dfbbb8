"""The spec model (the public contract of ``pipelines/*.yaml``) and its loader.

Loading is two passes: pydantic checks shape, types and bounds of the whole file; then the
cross-field checks that need the registry (kinds, params per kind, inputs, references, cycles).
Every issue of a file is collected and reported at once, each with file, line and column.
"""

from __future__ import annotations

import datetime as dt
import graphlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from dagspec.errors import SpecIssue, SpecValidationError
from dagspec.registry import InputRole, IOType, KindDef, StageParams, get_kind, kind_names, suggest
from dagspec.yaml_source import Location, YamlDocument, dotted_location, load_yaml_file

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*$"
DAG_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
MEMORY_PATTERN = r"^[0-9]+[kKmMgGtT]?$"
SCHEDULE_PRESETS = {"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly"}
FORCE_PARAM = "force"


def is_templated(value: Any) -> bool:
    """True for a string that Jinja will render at run time."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def contains_template(value: Any) -> bool:
    """True if a value or anything nested in it is a Jinja template."""
    if isinstance(value, Mapping):
        return any(contains_template(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(contains_template(v) for v in value)
    return is_templated(value)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamSpec(_Model):
    """One run parameter; becomes an Airflow ``Param`` (a field of the trigger form)."""

    type: Literal["string", "number", "integer", "boolean", "array", "object", "null"] = "string"
    default: Any = None
    description: str | None = None
    title: str | None = None
    enum: list[Any] | None = None
    minimum: float | None = None
    maximum: float | None = None
    minLength: int | None = Field(default=None, ge=0)  # noqa: N815 - JSON-schema spelling
    maxLength: int | None = Field(default=None, ge=0)  # noqa: N815

    def json_schema(self) -> dict[str, Any]:
        """The JSON-schema keywords Airflow's Param takes (everything but default/description)."""
        return self.model_dump(exclude={"default", "description"}, exclude_none=True)

    @model_validator(mode="after")
    def _default_matches_schema(self) -> ParamSpec:
        # Airflow depends on jsonschema; the local import keeps loading cheap.
        from jsonschema.exceptions import best_match
        from jsonschema.validators import validator_for

        if self.default is not None:
            # What jsonschema.validate does, minus check_schema (validating the schema against the
            # meta-schema, ~90% of its cost): this model's field types only produce valid schemas.
            schema = self.json_schema()
            error = best_match(validator_for(schema)(schema).iter_errors(self.default))
            if error is not None:
                raise ValueError(f"default {self.default!r} does not match the param's schema: {error.message}")
        return self


class DefaultArgs(_Model):
    """Task defaults (Airflow ``default_args``); durations in seconds."""

    owner: str = "dagspec"
    retries: int = Field(default=0, ge=0)
    retry_delay: float = Field(default=60, ge=0)
    retry_exponential_backoff: bool = False
    execution_timeout: float | None = Field(default=None, gt=0)


class StorageSpec(_Model):
    """Where checkpoints live: a local path (relative to the project) or a Hadoop URI."""

    root: str = ".dagspec/storage"


class Resources(_Model):
    """spark-submit resources; every field optional so a stage can override just one."""

    driver_memory: str | None = Field(default=None, pattern=MEMORY_PATTERN)
    executor_memory: str | None = Field(default=None, pattern=MEMORY_PATTERN)
    executor_cores: int | None = Field(default=None, ge=1)
    num_executors: int | None = Field(default=None, ge=1)
    total_executor_cores: int | None = Field(default=None, ge=1)

    def merged(self, override: Resources | None) -> Resources:
        """These resources with every field ``override`` sets replaced."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_none=True))


ConfValue = str | int | float | bool


class SparkSpec(_Model):
    """Pipeline-wide Spark settings; the master comes from the Airflow connection, never here."""

    conn_id: str = "spark_default"
    conf: dict[str, ConfValue] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)


class StageSparkSpec(_Model):
    """Per-stage Spark overrides, merged over the pipeline's."""

    conf: dict[str, ConfValue] = Field(default_factory=dict)
    resources: Resources | None = None


class StageSpec(_Model):
    """One stage = one Airflow task = one spark-submit. ``params`` are checked against the kind."""

    kind: str
    description: str | None = None
    inputs: dict[str, str] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    spark: StageSparkSpec | None = None
    retries: int | None = Field(default=None, ge=0)
    execution_timeout: float | None = Field(default=None, gt=0)

    @field_validator("inputs")
    @classmethod
    def _references_are_well_formed(cls, inputs: dict[str, str]) -> dict[str, str]:
        for role, ref in inputs.items():
            if not re.match(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)?$", str(ref)):
                raise ValueError(f"input {role!r}: expected 'stage' or 'stage.output', got {ref!r}")
        return inputs


class PipelineSpec(_Model):
    """A whole spec file. ``source`` and ``dag_id`` are filled in by the loader."""

    dag_id: str = Field(default="", pattern=r"^$|" + DAG_ID_PATTERN)
    description: str | None = None
    schedule: str | None = None
    start_date: dt.datetime | dt.date | None = None
    catchup: bool = False
    tags: list[str] = Field(default_factory=list)
    default_args: DefaultArgs = Field(default_factory=DefaultArgs)
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    spark: SparkSpec = Field(default_factory=SparkSpec)
    stages: dict[str, StageSpec] = Field(min_length=1)
    source: str = Field(default="", exclude=True)
    _stage_outputs: dict[str, tuple[str, ...]] = PrivateAttr(default_factory=dict)

    def outputs_of(self, stage: str) -> tuple[str, ...]:
        """Output names of a stage as known at load time (templated params: the kind's defaults)."""
        return self._stage_outputs.get(stage, ())

    @field_validator("stages")
    @classmethod
    def _stage_names_are_task_ids(cls, stages: dict[str, StageSpec]) -> dict[str, StageSpec]:
        for name in stages:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"stage name {name!r} must match {NAME_PATTERN} (it becomes the task_id)")
        return stages

    @field_validator("schedule")
    @classmethod
    def _schedule_is_cron_or_preset(cls, schedule: str | None) -> str | None:
        if schedule is None or schedule in SCHEDULE_PRESETS:
            return schedule
        from croniter import croniter  # an Airflow dependency, pure Python

        if not croniter.is_valid(schedule):
            raise ValueError(f"expected a cron expression, one of {sorted(SCHEDULE_PRESETS)} or null, got {schedule!r}")
        return schedule

    @model_validator(mode="after")
    def _scheduled_needs_start_date(self) -> PipelineSpec:
        if self.schedule not in (None, "@once") and self.start_date is None:
            raise ValueError("start_date is required when schedule is set")
        return self

    def stage_order(self) -> list[str]:
        """Stage names in a dependency order (inputs first)."""
        graph = {name: {parse_ref(r)[0] for r in s.inputs.values()} for name, s in self.stages.items()}
        return list(graphlib.TopologicalSorter(graph).static_order())


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``"split.train"`` -> ``("split", "train")``; ``"raw"`` -> ``("raw", None)``."""
    stage, _, output = ref.partition(".")
    return stage, output or None


def validate_stage_params(kind: KindDef, params: Mapping[str, Any]) -> tuple[StageParams | None, list[dict[str, Any]]]:
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


def spec_from_document(doc: YamlDocument) -> PipelineSpec:
    """Validate a parsed YAML document into a PipelineSpec, raising SpecValidationError."""
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
        _check_stages_alone(data, issues)
        raise SpecValidationError(issues.issues) from None
    _check_stages(spec, issues)
    if issues.issues:
        raise SpecValidationError(issues.issues)
    return spec


def _check_stages_alone(data: dict[str, Any], issues: _IssueCollector) -> None:
    """Stage-level checks even when a top-level key is wrong, so one run reports everything."""
    try:
        stages_only = PipelineSpec.model_validate({"stages": data.get("stages"), "dag_id": "x"})
    except ValidationError:
        return  # the stage errors are already among the top-level ones
    _check_stages(stages_only, issues)


def _check_stages(spec: PipelineSpec, issues: _IssueCollector) -> None:
    outputs: dict[str, Mapping[str, IOType]] = {}
    kinds: dict[str, KindDef] = {}
    for name, stage in spec.stages.items():
        kind = get_kind(stage.kind)
        if kind is None:
            issues.add(
                ("stages", name, "kind"),
                f"unknown stage kind {stage.kind!r}{suggest(stage.kind, kind_names())}; "
                f"known kinds: {', '.join(kind_names())}",
            )
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


def load_spec(path: str | Path, display_name: str | None = None) -> PipelineSpec:
    """Load and fully validate one spec file; raises a SpecError listing every issue."""
    return spec_from_document(load_yaml_file(path, display_name))
