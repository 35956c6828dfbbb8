"""The spec models: the public contract of ``pipelines/*.yaml``, as frozen pydantic models.

Unknown keys are refused everywhere; a stage's ``params`` are checked against its kind by the
loader (``dagspec.spec.loader``), which knows the catalog of kinds.
"""

from __future__ import annotations

import datetime as dt
import graphlib
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from dagspec.spec.templates import is_templated

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*$"
DAG_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
MEMORY_PATTERN = r"^[0-9]+[kKmMgGtT]?$"
SCHEDULE_PRESETS = {"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly"}
FORCE_PARAM = "force"
RESERVED_DAG_IDS = frozenset({"exports"})


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

    @field_validator("dag_id")
    @classmethod
    def _dag_id_is_not_reserved(cls, dag_id: str) -> str:
        if dag_id in RESERVED_DAG_IDS:
            raise ValueError(f"dag_id {dag_id!r} is reserved (the storage root's exports folder)")
        return dag_id

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
