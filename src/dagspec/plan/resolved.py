"""What a resolved plan is made of: a stage ready to run and where each of its inputs reads.

``ResolvedStage`` is the contract that crosses from the Airflow side (or the CLI) to the Spark job,
as JSON; ``dagspec.plan.resolve`` builds it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dagspec.checkpoint import Checkpoint
from dagspec.kinds.base import IOType


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


PARTITIONS_DIR = "_partitions"  # <stage dir>/_partitions/<key>/: a partition's own stage folder


class ResolvedStage(_Frozen):
    """A stage ready to run: rendered params, cache key, fingerprint and every path.

    This model is what crosses from the Airflow side (or the CLI) to the Spark job, as JSON.
    """

    dag_id: str
    name: str
    kind: str
    params: dict[str, Any]
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
    def from_json(cls, text: str) -> ResolvedStage:
        """Inverse of to_json (validated)."""
        return cls.model_validate_json(text)
