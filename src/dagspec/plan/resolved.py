"""What a resolved plan is made of: a stage ready to run and where each of its inputs reads.

``ResolvedStage`` is the contract that crosses from the Airflow side (or the CLI) to the Spark job,
as JSON; ``dagspec.plan.resolve`` builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_serializer, model_validator

from dagspec.checkpoint import Checkpoint
from dagspec.errors import StageConfigError
from dagspec.kinds.base import IOType, StageParams
from dagspec.kinds.catalog import Catalog, load_catalog


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResolvedInput(_Frozen):
    """Where a stage's input role reads from."""

    role: str
    stage: str
    output: str
    fingerprint: str
    stage_dir: str
    path: str
    type: IOType
    outputs: list[str]
    content: str | None = None  # the committed output's content digest (None: not committed yet, or an old one)
    committed: str = ""  # when the upstream checkpoint read was committed
    spec: str = ""  # the dag_id of the spec whose output this is, when it is another spec's
    partition: str = ""  # the upstream partition read, when the upstream is partitioned
    # several partitions of a partitioned stage read as one table (its window): each part's checkpoint
    parts: list[ResolvedInput] = Field(default_factory=list)

    @classmethod
    def of(cls, role: str, upstream: ResolvedStage, output: str, **where: Any) -> ResolvedInput:
        """Input ``role`` reading ``output`` of ``upstream``; ``where``: ``path`` and what else is known."""
        return cls(
            role=role,
            stage=upstream.name,
            output=output,
            fingerprint=upstream.fingerprint,
            stage_dir=upstream.stage_dir,
            type=upstream.outputs[output],
            outputs=list(upstream.outputs),
            **where,
        )

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.stage_dir, self.fingerprint)

    @property
    def key(self) -> str:
        """This input in the reader's cache key: the upstream output's content when known (early
        cutoff: an upstream recomputed to identical bytes leaves the reader's key unchanged), else
        the upstream's fingerprint."""
        if self.is_window:  # exactly the partitions it reads, each by its content
            return f"{self.stage}.{self.output}[{';'.join(p.partition + p.identity for p in self.parts)}]"
        return f"{self.stage}.{self.output}{self.identity}"

    @property
    def is_window(self) -> bool:
        """Does this input read partitions of a partitioned stage as one table (no single folder)?"""
        return bool(self.parts) or not self.path

    @property
    def identity(self) -> str:
        """``#<content digest>`` when committed, else ``@<fingerprint>``."""
        return f"#{self.content}" if self.content else f"@{self.fingerprint}"


class PlanParamsError(StageConfigError):
    """A plan read from JSON whose stage's kind is unknown here, or whose params its kind's model
    refuses: the kind's code changed between planning and running."""

    def __init__(self, stage: str, kind: str, cause: str) -> None:
        self.stage, self.kind, self.cause = stage, kind, cause
        super().__init__(f"stage {stage!r}: {cause}")


def _params_of_kind(data: Mapping[str, Any], catalog: Catalog | None) -> StageParams:
    """A stage's params read from JSON, validated against its kind's model (the kind is ``data["kind"]``)."""
    name, kind_name = str(data.get("name", "?")), str(data.get("kind", "?"))
    catalog = catalog or load_catalog(Path(data["home"]))
    kind = catalog.get(kind_name)
    if kind is None:
        raise PlanParamsError(name, kind_name, catalog.unknown_message(kind_name))
    try:
        return kind.params.model_validate(data["params"])
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise PlanParamsError(name, kind_name, f"params refused by kind {kind_name!r}: {problems}") from None


PARTITIONS_DIR = "_partitions"  # <stage dir>/_partitions/<key>/: a partition's own stage folder


class ResolvedStage(_Frozen):
    """A stage ready to run: rendered params, cache key, fingerprint and every path.

    This model is what crosses from the Airflow side (or the CLI) to the Spark job, as JSON.
    """

    dag_id: str
    name: str
    kind: str
    # the kind's params model, validated once per process: when planning, or where the plan is read
    # from JSON (``from_json``); in JSON by alias, as in the stage's key
    params: StageParams
    key: dict[str, Any]
    fingerprint: str
    storage_root: str
    stage_dir: str
    home: str
    inputs: dict[str, ResolvedInput] = Field(default_factory=dict)
    outputs: dict[str, IOType] = Field(default_factory=dict)
    source_files: list[str] = Field(default_factory=list)
    conf: dict[str, str] = Field(default_factory=dict)
    publish_path: str | None = None
    written_name: str = ""  # the stage as written in the spec (a matrix stage for its expansions)
    # the first upstream stages not committed yet: the content of what they lead to is part of
    # this key, so until they run this fingerprint is provisional (each task resolves it again)
    pending: list[str] = Field(default_factory=list)
    # the run's spec params (``force`` left out), kept in the manifest: which run published an export
    run_params: dict[str, Any] = Field(default_factory=dict)
    # the Airflow run resolving it ("" outside a run), kept in the manifest: which run computed a checkpoint
    run_id: str = ""
    # why the stage cannot run: another spec's output it reads has no committed checkpoint yet
    blocked: list[str] = Field(default_factory=list)
    partition: str = ""  # the partition this is, of a partitioned stage
    # a partitioned stage: its partitions the run reads or computes (key -> that partition resolved),
    # and the ones outside the run's scope that are not committed (left alone)
    partitioned: bool = False
    partitions: dict[str, ResolvedStage] = Field(default_factory=dict)
    skipped: list[str] = Field(default_factory=list)
    parallel: int = 1  # partitions computed at once (the spec's partitions.parallel)

    @model_validator(mode="before")
    @classmethod
    def _validated_params(cls, data: Any, info: ValidationInfo) -> Any:
        """Params given as JSON (a mapping) become the kind's model; a model given is kept as it is."""
        if isinstance(data, Mapping) and isinstance(data.get("params"), Mapping):
            catalog = (info.context or {}).get("catalog")
            return {**data, "params": _params_of_kind(data, catalog)}
        return data

    @field_serializer("params")
    def _params_by_alias(self, params: StageParams) -> dict[str, Any]:
        return self.params_json()

    def params_json(self) -> dict[str, Any]:
        """The params as the stage's key and its manifest hold them (by alias, JSON values)."""
        return self.params.model_dump(mode="json", by_alias=True)

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.stage_dir, self.fingerprint)

    @property
    def checkpoint_dir(self) -> str:
        return self.checkpoint.path

    @property
    def success_path(self) -> str:
        return self.checkpoint.success_path

    def output_path(self, name: str) -> str:
        """Path of one output inside the committed checkpoint."""
        return self.checkpoint.output_path(name)

    def to_json(self) -> str:
        """The single argument a job receives."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str, catalog: Catalog | None = None) -> ResolvedStage:
        """Inverse of to_json (validated: the params against their kind's model in ``catalog``, by
        default the catalog of the stage's ``home``); PlanParamsError if the kind refuses them."""
        return cls.model_validate_json(text, context={"catalog": catalog})
