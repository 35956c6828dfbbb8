"""The spec models: the public contract of ``pipelines/*.yaml``, as frozen pydantic models.

Unknown keys are refused everywhere; a stage's ``params`` are checked against its kind by the
loader (``dagspec.spec.loader``), which knows the catalog of kinds.
"""

from __future__ import annotations

import datetime as dt
import graphlib
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from dagspec.spec.partitions import PartitionsSpec, PartitionWindow
from dagspec.spec.roots import DEFAULT_STORAGE_ROOT, check_storage_root
from dagspec.spec.safety import check_conf_key, check_conf_value
from dagspec.spec.schedule import SCHEDULE_PRESETS, AssetSchedule, FilesSchedule, Schedule, check_cron
from dagspec.spec.spec_input import SpecInput, StageInput
from dagspec.spec.templates import is_templated

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*$"
DAG_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
MEMORY_PATTERN = r"^[0-9]+[kKmMgGtT]?$"
FORCE_PARAM = "force"
INVALID_SPECS_DAG_ID = "dagspec_invalid_specs"  # the DAG file's stand-in that carries broken specs' errors
RESERVED_DAG_IDS = frozenset({"exports", INVALID_SPECS_DAG_ID})
# Airflow's own limits (airflow.sdk.definitions._internal.node.validate_key, dag.TAG_MAX_LEN,
# validate_group_key): a dag_id or task_id of at most 250 characters, a tag of at most 100, a
# TaskGroup id (a matrix stage's name) of at most 200.
MAX_DAG_ID_LENGTH = 250
MAX_TASK_ID_LENGTH = 250
MAX_TAG_LENGTH = 100
MAX_STAGE_NAME_LENGTH = 200
ParamType = Literal["string", "number", "integer", "boolean", "array", "object", "null"]
MatrixValue = str | int | float | bool
Location = tuple[str | int, ...]


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

    type: ParamType | list[ParamType] = Field(
        default="string",
        description='JSON-schema type, or a list of types; an optional param includes "null": [string, "null"]',
    )
    default: Any = Field(default=None, description="the value of a run that does not set the param")
    description: str | None = Field(default=None, description="help text under the field of the trigger form")
    title: str | None = Field(default=None, description="the field's label in the trigger form (default: its name)")
    enum: list[Any] | None = Field(default=None, description="the allowed values (a drop-down in the form)")
    minimum: float | None = None
    maximum: float | None = None
    minLength: int | None = Field(default=None, ge=0)  # noqa: N815 - JSON-schema spelling
    maxLength: int | None = Field(default=None, ge=0)  # noqa: N815

    def json_schema(self) -> dict[str, Any]:
        """The JSON-schema keywords Airflow's Param takes (everything but default/description)."""
        return self.model_dump(exclude={"default", "description"}, exclude_none=True)

    def types(self) -> list[str]:
        """The param's JSON-schema types as a list."""
        return list(self.type) if isinstance(self.type, list) else [self.type]

    @property
    def optional(self) -> bool:
        """True when the trigger form accepts the field empty: Airflow's UI requires a value of a
        param whose type is one name, or a list without "null" (FlexibleForm ``isRequired``)."""
        return isinstance(self.type, list) and "null" in self.type

    @field_validator("type")
    @classmethod
    def _types_are_distinct(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and (not value or len(set(value)) != len(value)):
            raise ValueError(f"a list of types must be non-empty and without repeats, got {value}")
        return value

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
        # Airflow's trigger form disables "Trigger" while a required field is null or "": the DAG
        # could not be run from the UI with its defaults.
        if self.default in (None, "") and not self.optional:
            single = self.types()[0] if len(self.types()) == 1 else "string"
            given = "an empty string" if self.default == "" else "no value"
            raise ValueError(
                f"the default is {given}, which Airflow's trigger form treats as a missing required value "
                f"(Trigger stays disabled); give a default, or make the param optional: "
                f'type: [{single}, "null"], default: null'
            )
        return self


class DefaultArgs(_Model):
    """Task defaults (Airflow ``default_args``); durations in seconds."""

    owner: str = Field(default="dagspec", description="the tasks' owner shown in the UI")
    retries: int = Field(default=0, ge=0, description="retries of a failed task")
    retry_delay: float = Field(default=60, ge=0, description="seconds between retries")
    retry_exponential_backoff: bool = Field(default=False, description="double the delay after each retry")
    execution_timeout: float | None = Field(default=None, gt=0, description="seconds before a task is failed")


class StorageSpec(_Model):
    """Where checkpoints live: a local path (relative to the project) or a Hadoop URI."""

    root: str = Field(
        default=DEFAULT_STORAGE_ROOT,
        description="checkpoint root: a path relative to the project, an absolute path or a Hadoop URI, under "
        "the deployment's storage roots (docs/security.md)",
    )

    @field_validator("root")
    @classmethod
    def _root_is_the_deployments(cls, root: str) -> str:
        return check_storage_root(root)  # dagspec.spec.roots: under an allowed root, after '..' and symlinks


class Resources(_Model):
    """spark-submit resources; every field optional so a stage can override just one."""

    driver_memory: str | None = Field(default=None, pattern=MEMORY_PATTERN, description="--driver-memory (512m, 2g)")
    executor_memory: str | None = Field(default=None, pattern=MEMORY_PATTERN, description="--executor-memory")
    executor_cores: int | None = Field(default=None, ge=1, description="--executor-cores")
    num_executors: int | None = Field(default=None, ge=1, description="--num-executors (YARN, Kubernetes)")
    total_executor_cores: int | None = Field(default=None, ge=1, description="--total-executor-cores (standalone)")

    def merged(self, override: Resources | None) -> Resources:
        """These resources with every field ``override`` sets replaced."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_none=True))


# dagspec.spec.safety: a key on the allowlist (or the administrator's), a value that is no template;
# checked per entry so that an error points at the key's own line
ConfKey = Annotated[str, AfterValidator(check_conf_key)]
ConfValue = Annotated[str | int | float | bool, AfterValidator(check_conf_value)]
CONF_HELP = (
    "Spark conf: spark-submit --conf pairs, and spark.sql.* session settings on a Connect server; only keys on "
    "the allowlist of docs/security.md (or allowed by the administrator with DAGSPEC_ALLOWED_CONF)"
)


class SparkSpec(_Model):
    """Pipeline-wide Spark settings; the master comes from the Airflow connection, never here."""

    conn_id: str = "spark_default"
    conf: dict[ConfKey, ConfValue] = Field(default_factory=dict, description=CONF_HELP)
    resources: Resources = Field(default_factory=Resources)


class StageSparkSpec(_Model):
    """Per-stage Spark overrides, merged over the pipeline's."""

    conf: dict[ConfKey, ConfValue] = Field(default_factory=dict, description=CONF_HELP)
    resources: Resources | None = None


class StageSpec(_Model):
    """One stage = one Airflow task = one spark-submit. ``params`` are checked against the kind."""

    kind: str = Field(description="a registered stage kind (`dagspec list` names them)")
    description: str | None = Field(default=None, description="shown as the task's doc in the UI")
    inputs: dict[str, StageInput] = Field(
        default_factory=dict,
        description="role -> 'stage' or 'stage.output' of this spec (the DAG's edges); {stage: ..., last: N, "
        "skip_last: N, from: KEY, to: KEY}: a window of a partitioned stage's partitions; or {spec: dag_id, "
        "output: stage.output}: another spec's output, read from its last committed checkpoint",
    )
    partitioned: bool = Field(
        default=False,
        description="compute and checkpoint each partition of the spec's `partitions` on its own "
        "({{ partition.key }}, {{ partition.path }} in params); a new partition runs only itself",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="the kind's params; strings may be Jinja templates ({{ params.x }})"
    )
    matrix: dict[str, list[MatrixValue] | str] | None = Field(
        default=None,
        description="name -> list of values, or '{{ params.NAME }}' (that param's default): one stage per "
        "combination, {{ matrix.NAME }} in its params; fixed when the DAG is parsed",
    )
    spark: StageSparkSpec | None = Field(default=None, description="Spark conf and resources merged over `spark`")
    retries: int | None = Field(default=None, ge=0, description="overrides default_args.retries")
    execution_timeout: float | None = Field(default=None, gt=0, description="seconds; overrides default_args")

    @field_validator("inputs")
    @classmethod
    def _references_are_well_formed(
        cls, inputs: dict[str, str | SpecInput | PartitionWindow]
    ) -> dict[str, str | SpecInput | PartitionWindow]:
        for role, ref in inputs.items():
            if isinstance(ref, str) and not re.match(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)?$", ref):
                raise ValueError(
                    f"input {role!r}: expected 'stage' or 'stage.output' (another spec's output: "
                    f"{{spec: dag_id, output: stage.output}}), got {ref!r}"
                )
        return inputs

    def stage_refs(self) -> dict[str, str]:
        """role -> 'stage' or 'stage.output': the inputs read from this spec's own stages (windows included)."""
        return {
            role: ref.stage if isinstance(ref, PartitionWindow) else ref
            for role, ref in self.inputs.items()
            if isinstance(ref, str | PartitionWindow)
        }

    def windows(self) -> dict[str, PartitionWindow]:
        """role -> the window of a partitioned stage's partitions this input reads."""
        return {role: ref for role, ref in self.inputs.items() if isinstance(ref, PartitionWindow)}

    def spec_inputs(self) -> dict[str, SpecInput]:
        """role -> another spec's output: the inputs read from other specs' committed checkpoints."""
        return {role: ref for role, ref in self.inputs.items() if isinstance(ref, SpecInput)}


class PipelineSpec(_Model):
    """A whole spec file. ``source`` and ``dag_id`` are filled in by the loader."""

    dag_id: str = Field(
        default="",
        description="the Airflow DAG id (default: the file's stem); unique across specs",
        json_schema_extra={"pattern": DAG_ID_PATTERN, "maxLength": MAX_DAG_ID_LENGTH},
    )
    description: str | None = Field(default=None, description="DAG description (shown in the UI)")
    schedule: Schedule | None = Field(
        default=None,
        description="cron expression, preset (@daily, ...), null, {assets: [dag_id.stage.output, ...]} "
        "to run when other specs' outputs update, or {files: GLOB} to run on new files (see docs/spec.md)",
    )
    start_date: dt.datetime | dt.date | None = Field(default=None, description="first data interval (UTC)")
    catchup: bool = Field(default=False, description="backfill missed intervals")
    max_active_runs: int = Field(
        default=1,
        ge=1,
        le=64,
        description="runs of this DAG at once; runs with the same params share checkpoints (one computes, "
        "the others wait for it and hit)",
    )
    tags: list[str] = Field(
        default_factory=list,
        description="UI tags ('dagspec' is always added)",
        json_schema_extra={"items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_LENGTH}},
    )
    default_args: DefaultArgs = Field(default_factory=DefaultArgs, description="task defaults")
    params: dict[str, ParamSpec] = Field(
        default_factory=dict, description="run parameters: the trigger form, `dagspec run -p`, REST conf"
    )
    storage: StorageSpec = Field(default_factory=StorageSpec, description="where checkpoints live")
    partitions: PartitionsSpec | None = Field(
        default=None,
        description="what `partitioned: true` stages are partitioned by: {files: GLOB} (a partition per file) or "
        "{values: [...]}; see docs/spec.md, Partitions",
    )
    spark: SparkSpec = Field(default_factory=SparkSpec, description="Spark settings shared by every stage")
    stages: dict[str, StageSpec] = Field(
        min_length=1, description="name (the task_id) -> stage; edges come from inputs only"
    )
    source: str = Field(default="", exclude=True)
    # filled by the loader: stage -> output -> its type ("table", "files"), and (stage, role) -> the
    # type that input expects (roles of kinds that take any type are absent)
    _stage_outputs: dict[str, dict[str, str]] = PrivateAttr(default_factory=dict)
    _input_types: dict[tuple[str, str], str] = PrivateAttr(default_factory=dict)
    _loaded_params: dict[str, BaseModel] = PrivateAttr(default_factory=dict)  # spec.params.loaded_params
    # filled by the loader: YAML positions, and for each stage of a matrix expansion the stage as
    # written and its matrix values
    _positions: dict[Location, tuple[int, int]] = PrivateAttr(default_factory=dict)
    _key_positions: dict[Location, tuple[int, int]] = PrivateAttr(default_factory=dict)
    _expansions: dict[str, tuple[str, dict[str, Any]]] = PrivateAttr(default_factory=dict)
    _matrix_params: dict[str, Any] = PrivateAttr(default_factory=dict)

    def outputs_of(self, stage: str) -> tuple[str, ...]:
        """Output names of a stage as known at load time (templated params: the kind's defaults)."""
        return tuple(self._stage_outputs.get(stage, ()))

    def output_type(self, stage: str, output: str) -> str | None:
        """The type of a stage output as known at load time ("table", "files"), None if unknown."""
        return self._stage_outputs.get(stage, {}).get(output)

    def input_type(self, stage: str, role: str) -> str | None:
        """The type a stage's input expects ("table", "files"), None when its kind takes any."""
        return self._input_types.get((stage, role))

    def written_stage(self, stage: str) -> str:
        """The stage as written in the file: a matrix stage for its expansions, else ``stage`` itself."""
        return self._expansions[stage][0] if stage in self._expansions else stage

    def matrix_of(self, stage: str) -> dict[str, Any]:
        """The matrix values of a stage (``{}`` for a stage that is no matrix expansion)."""
        return dict(self._expansions[stage][1]) if stage in self._expansions else {}

    def matrix_groups(self) -> dict[str, list[str]]:
        """Each matrix stage as written -> its expansions, in order."""
        groups: dict[str, list[str]] = {}
        for name, (written, _) in self._expansions.items():
            groups.setdefault(written, []).append(name)
        return groups

    def matrix_params(self) -> dict[str, Any]:
        """Params whose default shapes a matrix -> that default (a run may not change it)."""
        return dict(self._matrix_params)

    def position(self, location: Location, *, prefer_key: bool = False) -> tuple[int, int]:
        """(line, column) of a location in the file (of its key, with ``prefer_key``), or of its
        nearest known parent; (1, 1) if unknown."""
        loc = tuple(location)
        while loc:
            if prefer_key and loc in self._key_positions:
                return self._key_positions[loc]
            if loc in self._positions:
                return self._positions[loc]
            loc = loc[:-1]
        return self._positions.get(loc, (1, 1))

    @field_validator("stages")
    @classmethod
    def _stage_names_are_task_ids(cls, stages: dict[str, StageSpec]) -> dict[str, StageSpec]:
        for name in stages:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"stage name {name!r} must match {NAME_PATTERN} (it becomes the task_id)")
            if len(name) > MAX_STAGE_NAME_LENGTH:
                raise ValueError(
                    f"stage name {name[:20]!r}... is {len(name)} characters long; at most {MAX_STAGE_NAME_LENGTH} "
                    "(Airflow's limit for a TaskGroup id, which a matrix stage becomes)"
                )
        return stages

    @field_validator("tags")
    @classmethod
    def _tags_fit_airflow(cls, tags: list[str]) -> list[str]:
        for tag in tags:
            if not tag or len(tag) > MAX_TAG_LENGTH:
                raise ValueError(f"tag {tag[:20]!r} is {len(tag)} characters long; Airflow takes 1 to {MAX_TAG_LENGTH}")
        return tags

    @field_validator("schedule")
    @classmethod
    def _schedule_is_cron_or_preset(cls, schedule: Schedule | None) -> Schedule | None:
        if isinstance(schedule, str):
            return check_cron(schedule, allowed=SCHEDULE_PRESETS, also=", null, {assets: [...]} or {files: GLOB}")
        return schedule

    @field_validator("dag_id")
    @classmethod
    def _dag_id_fits_airflow(cls, dag_id: str) -> str:
        if dag_id in RESERVED_DAG_IDS:
            used = "the storage root's exports folder" if dag_id == "exports" else "the DAG file's error carrier"
            raise ValueError(f"dag_id {dag_id!r} is reserved ({used})")
        if len(dag_id) > MAX_DAG_ID_LENGTH:
            raise ValueError(f"dag_id is {len(dag_id)} characters long; Airflow allows at most {MAX_DAG_ID_LENGTH}")
        if dag_id and not re.match(DAG_ID_PATTERN, dag_id):
            raise ValueError(
                f"dag_id {dag_id!r} may only hold ASCII letters, digits, '_', '.' and '-' (Airflow's rule), "
                "and must not start with '.' or '-'"
            )
        return dag_id

    @model_validator(mode="after")
    def _scheduled_needs_start_date(self) -> PipelineSpec:
        timed = self.schedule.cron if isinstance(self.schedule, AssetSchedule) else self.schedule
        timed = None if isinstance(timed, FilesSchedule) else timed
        if timed not in (None, "@once") and self.start_date is None:
            raise ValueError("start_date is required when schedule is set to a time")
        return self

    def stage_order(self) -> list[str]:
        """Stage names in a dependency order (inputs first)."""
        graph = {name: {parse_ref(r)[0] for r in s.stage_refs().values()} for name, s in self.stages.items()}
        return list(graphlib.TopologicalSorter(graph).static_order())


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``"split.train"`` -> ``("split", "train")``; ``"raw"`` -> ``("raw", None)``."""
    stage, _, output = ref.partition(".")
    return stage, output or None
