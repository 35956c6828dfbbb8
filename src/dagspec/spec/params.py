"""A stage's params: rendered with a context and validated against the kind's model, in one function.

``dagspec validate`` calls it with the params' defaults and a stand-in run context, a task calls
it with the run's context (``dagspec.plan.resolve.render_params``): a template that cannot be
rendered and a rendered value the model refuses give the same words at both times.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from dagspec.errors import DagspecError, SpecIssue
from dagspec.kinds.base import StageParams
from dagspec.kinds.catalog import suggest
from dagspec.spec.models import FORCE_PARAM, PipelineSpec
from dagspec.spec.partitions import glob_of
from dagspec.spec.schedule import UNION_TAG_PREFIX
from dagspec.spec.templates import describe_failure, is_templated, render
from dagspec.spec.yaml_source import dotted_location

ParamLocation = tuple[str | int, ...]
KEY_PART = "[key]"  # the last part of a pydantic location when a mapping's key, not its value, failed
# The run context a template may use, with stand-in values for `dagspec validate` (a scheduled run
# of the spec's start date).
RUN_CONTEXT_KEYS = (
    "ds",
    "ds_nodash",
    "ts",
    "ts_nodash",
    "run_id",
    "logical_date",
    "data_interval_start",
    "data_interval_end",
)


@dataclass(frozen=True)
class ParamProblem:
    """One problem of a stage's params: where inside ``params`` and what."""

    location: ParamLocation
    message: str


class StageParamsError(ValueError):
    """A stage's params cannot be rendered or fail the kind's model; carries every problem."""

    def __init__(self, problems: list[ParamProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{'.'.join(map(str, p.location))}: {p.message}" for p in problems))


def standin_context(spec: PipelineSpec) -> dict[str, Any]:
    """The params' defaults and the run values of a scheduled run at the spec's start date."""
    start = spec.start_date or dt.date(2026, 1, 1)
    if not isinstance(start, dt.datetime):
        start = dt.datetime(start.year, start.month, start.day)
    start = start if start.tzinfo else start.replace(tzinfo=dt.UTC)
    params = {name: p.default for name, p in spec.params.items()}
    params.setdefault(FORCE_PARAM, False)
    return {
        "params": params,
        "ds": start.strftime("%Y-%m-%d"),
        "ds_nodash": start.strftime("%Y%m%d"),
        "ts": start.isoformat(),
        "ts_nodash": start.strftime("%Y%m%dT%H%M%S"),
        "run_id": f"scheduled__{start.isoformat()}",
        "logical_date": start,
        "data_interval_start": start,
        "data_interval_end": start + dt.timedelta(days=1),
    }


def render_stage_params(model: type[StageParams], params: Mapping[str, Any], context: Mapping[str, Any]) -> StageParams:
    """Render the templates in ``params`` with ``context`` and validate the result against ``model``.

    Raises StageParamsError listing every template that failed to render, else every field the
    model refused (a value rendered from a template says so).
    """
    rendered, problems = _render_tree(params, context, ())
    if problems:
        raise StageParamsError(problems)
    for _ in range(100):  # bounded: each round turns at least one more value into text
        try:
            return model.model_validate(rendered)
        except ValidationError as exc:
            errors = exc.errors()
            if not _as_text_where_text_is_expected(errors, params, rendered):
                raise StageParamsError(
                    [ParamProblem(_clean(e["loc"]), describe_error(e, model, params)) for e in errors]
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def loaded_params(spec: PipelineSpec, name: str, model: type[StageParams]) -> StageParams | None:
    """Stage ``name``'s params as the loader validated them, when they hold no template: rendering
    leaves them as written whatever the context, so a run needs no second validation. None when
    templated (or validated against another model than ``model``)."""
    loaded = spec._loaded_params.get(name)
    return loaded if isinstance(loaded, model) and type(loaded) is model else None


def _render_tree(value: Any, context: Mapping[str, Any], loc: ParamLocation) -> tuple[Any, list[ParamProblem]]:
    if is_templated(value):
        try:
            return render(value, context), []
        except Exception as exc:  # anything a template raises is the spec's error, reported by location
            return None, [ParamProblem(loc, describe_failure(value, exc, context))]
    if isinstance(value, Mapping):
        items = [(k, _render_tree(v, context, (*loc, k))) for k, v in value.items()]
        return {k: r for k, (r, _) in items}, [p for _, (_, ps) in items for p in ps]
    if isinstance(value, list | tuple):
        parts = [_render_tree(v, context, (*loc, i)) for i, v in enumerate(value)]
        return [r for r, _ in parts], [p for _, ps in parts for p in ps]
    return value, []


def _at(value: Any, loc: ParamLocation) -> Any:
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _as_text_where_text_is_expected(errors: list[ErrorDetails], source: Any, rendered: Any) -> bool:
    """A ``{{ expression }}`` whose value is a number (or a date) where the model wants text
    becomes the text Jinja would print, as before templates kept their types. True if any changed."""
    changed = False
    for error in errors:
        loc = _clean(error["loc"])
        if error["type"] != "string_type" or not loc or not is_templated(_at(source, loc)):
            continue
        parent = _at(rendered, loc[:-1])
        value = _at(rendered, loc)
        if value is None or isinstance(value, str | list | dict) or not isinstance(parent, dict | list):
            continue
        parent[loc[-1]] = str(value)  # type: ignore[index]
        changed = True
    return changed


def _clean(loc: tuple[Any, ...]) -> ParamLocation:
    """An error's location without pydantic's validator, union-tag and dict-key parts (no YAML key)."""
    return tuple(
        p for p in loc if not (isinstance(p, str) and (p.startswith(("function-", UNION_TAG_PREFIX)) or p == KEY_PART))
    )


def is_key_error(error: ErrorDetails) -> bool:
    """Is the error about a mapping's key (unknown, or refused by a key validator) rather than its value?"""
    return error["type"] == "extra_forbidden" or (bool(error["loc"]) and error["loc"][-1] == KEY_PART)


def clean_location(loc: tuple[Any, ...]) -> ParamLocation:
    """A pydantic error's location as the keys of the YAML file."""
    return _clean(loc)


def _template_above(source: Any, loc: ParamLocation) -> str | None:
    """The template whose rendering produced the value at ``loc`` (itself or an enclosing value)."""
    value = source
    for part in (None, *loc):
        if part is not None:
            try:
                value = value[part]
            except (KeyError, IndexError, TypeError):
                return None
        if is_templated(value):
            return str(value)
    return None


def describe_error(error: ErrorDetails, model: type[BaseModel], source: Any = None) -> str:
    """One pydantic error as a sentence: unknown keys with 'did you mean', the value that was given,
    and the template it was rendered from."""
    loc = _clean(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        known = model_fields_at(model, loc)
        return f"unknown key {key!r}{suggest(key, known)}; expected one of: {', '.join(known)}"
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    template = _template_above(source, loc) if source is not None else None
    scalar = isinstance(value, str | int | float | bool) or value is None
    if template is not None and template != value:
        shown = repr(value) if scalar else type(value).__name__
        message += f" (got {shown}, rendered from {template!r})"
    elif scalar and repr(value) not in message:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:60] + "..."
        message += f" (got {shown})"
    return message


def model_fields_at(model: type[BaseModel], loc: ParamLocation) -> list[str]:
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
        current = _the_model_of(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items() if not f.exclude]
    # a union of several models (the mapping forms of ``schedule``): the keys of any of them
    models = [
        a for a in (_the_model_of(a) for a in get_args(current)) if isinstance(a, type) and issubclass(a, BaseModel)
    ]
    return list(dict.fromkeys(f.alias or n for m in models for n, f in m.model_fields.items() if not f.exclude))


def _the_model_of(annotation: Any) -> Any:
    """The annotation without Optional and Annotated; of a union, its one model if it has one."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) is dict:
        return annotation
    args = [_the_model_of(a) for a in get_args(annotation) if a is not type(None)]
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    if len(args) == 1:
        return args[0]
    return models[0] if len(models) == 1 else annotation


def matrix_note(values: Mapping[str, Any]) -> str:
    """`` (matrix n=3, engine=lr)`` for the messages of a matrix expansion, '' otherwise."""
    return f" (matrix {', '.join(f'{k}={v}' for k, v in values.items())})" if values else ""


def stage_context(spec: PipelineSpec, stage: str, context: Mapping[str, Any]) -> Mapping[str, Any]:
    """``context`` plus ``matrix`` (the stage's matrix values) for an expansion of a matrix stage, and
    for a partitioned stage outside a partition (validation) a stand-in ``partition``."""
    values = spec.matrix_of(stage)
    context = {**context, "matrix": values} if values else context
    written = spec.stages.get(stage)
    if written is not None and written.partitioned and "partition" not in context and spec.partitions:
        declared = spec.partitions.values or []
        files = spec.partitions.files or ""
        path = "/standin/partition" if is_templated(files) else glob_of(files)
        context = {**context, "partition": {"key": str(declared[0]) if declared else "standin", "path": path}}
    return context


def stage_param_issues(spec: PipelineSpec, stage: str, problems: list[ParamProblem]) -> list[SpecIssue]:
    """Problems of a stage's params as ``file:line:col`` issues at the stage as written in the file
    (the same lines from ``dagspec validate`` and from a task at run time)."""
    written = spec.written_stage(stage)
    note = matrix_note(spec.matrix_of(stage))
    issues = []
    for problem in problems:
        location = ("stages", written, "params", *problem.location)
        line, column = spec.position(location, prefer_key=problem.message.startswith("unknown key"))
        issues.append(SpecIssue(spec.source, line, column, dotted_location(location), problem.message + note))
    return issues


def is_true(value: object) -> bool:
    """Truthiness of a flag that may arrive as a bool or as a string (a form, ``-p``, a connection extra)."""
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


def run_param_value(spec: PipelineSpec, name: str, raw: str) -> Any:
    """The value of ``-p name=raw`` (strings stay strings; other types are parsed as YAML), checked
    against the param's declaration; a DagspecError names the declaration's ``file:line:col``."""
    import yaml
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    param = spec.params.get(name)
    if param is None:
        known = ", ".join(spec.params) or "none"
        raise DagspecError(
            f"unknown param {name!r} for {spec.dag_id}{suggest(name, list(spec.params))}; params: {known}"
        )
    try:
        value = raw if param.types() == ["string"] else yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    schema = param.json_schema()
    error = best_match(validator_for(schema)(schema).iter_errors(value))
    if error is None:
        return value
    line, col = spec.position(("params", name), prefer_key=True)
    raise DagspecError(
        f"{spec.source}:{line}:{col}: params.{name}: -p {name}={raw} does not fit the param's declaration: "
        f"{error.message}"
    )
