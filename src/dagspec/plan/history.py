"""What each Airflow run ran, stage by stage: recorded when the stage's task ends, read back as is.

A run's results are its history: which fingerprint each stage resolved to *in that run*, whether
the run computed the checkpoint (``ran``) or found it committed (``hit``), where it is, its rows
and metrics. Resolving an old run again with today's spec, code and data would give today's
fingerprints (an input file that grew, a changed default), so nothing that shows a past run does
that: it reads these records.

One file per stage and run, written once by the stage's task (the operator), atomically::

    <root>/<dag_id>/.runs/<run>/<stage>.json     <run>: the run id, percent-encoded

``.runs`` cannot be a stage's folder (stage names have no dot). A later run writes under its own
run id, so it never rewrites an earlier run's record; a retried task of the same run replaces its
own. A record is a :class:`StageRecord` on both sides (``model_dump_json`` / ``model_validate_json``
behind :func:`read_run`, which checks the version).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dagspec import storage
from dagspec.checkpoint import Checkpoint
from dagspec.errors import DagspecError
from dagspec.kinds.base import IOType
from dagspec.plan.resolve import ResolvedStage
from dagspec.plan.resolved import PARTITIONS_DIR

RUNS_DIR = ".runs"
RECORD_VERSION: Literal[1] = 1


class RecordError(DagspecError):
    """A run record that cannot be read (unreadable JSON, another version, a wrong shape)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordedInput(_Frozen):
    """One input of a stage as the run read it."""

    stage: str
    output: str
    fingerprint: str
    spec: str = ""  # the dag_id of another spec whose output it is
    rows: int | None = None


class StageRecord(_Frozen):
    """What one stage was in one run: its fingerprint, ``ran`` or ``hit``, its checkpoint, rows and metrics."""

    version: Literal[1] = RECORD_VERSION
    dag_id: str
    run_id: str
    stage: str
    kind: str
    fingerprint: str
    outcome: Literal["ran", "hit"]  # this run computed the checkpoint, or found it committed
    stage_dir: str
    checkpoint: str  # the committed checkpoint's folder: <stage_dir>/<fingerprint>
    committed_by: str = ""  # the run id that computed the checkpoint ("": before manifests named it)
    started: str = ""  # of the computation, as its manifest says (a hit: the earlier run's)
    finished: str = ""
    duration_s: float | None = None
    recorded: str
    try_number: int | None = None
    outputs: dict[str, IOType] = Field(default_factory=dict)
    rows: dict[str, int] = Field(default_factory=dict)
    rows_in: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    run_params: dict[str, Any] = Field(default_factory=dict)  # the run's spec params (``force`` left out)
    inputs: dict[str, RecordedInput] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)  # the manifest's, as committed

    @property
    def checkpoint_ref(self) -> Checkpoint:
        return Checkpoint(self.stage_dir, self.fingerprint)


def run_folder_name(run_id: str) -> str:
    """A run id as one folder name on any filesystem (``:`` and ``+`` of Airflow's ids encoded; HDFS refuses ``:``)."""
    return quote(run_id, safe="-_").replace(".", "%2E") or "%00"


def run_dir(root: str, dag_id: str, run_id: str) -> str:
    """Where the records of one run of ``dag_id`` live."""
    return f"{root.rstrip('/')}/{dag_id}/{RUNS_DIR}/{run_folder_name(run_id)}"


def _rows_in(stage: ResolvedStage) -> tuple[dict[str, RecordedInput], int | None]:
    inputs, total, known = {}, 0, False
    for role, source in stage.inputs.items():
        rows = None
        if source.type == IOType.TABLE:
            found = ((source.checkpoint.manifest() or {}).get("rows") or {}).get(source.output)
            rows = found if isinstance(found, int) else None
        if rows is not None:
            total, known = total + rows, True
        inputs[role] = RecordedInput(
            stage=source.stage, output=source.output, fingerprint=source.fingerprint, spec=source.spec, rows=rows
        )
    return inputs, total if known else None


def stage_record(stage: ResolvedStage, manifest: Mapping[str, Any], run_id: str, try_number: int | None) -> StageRecord:
    """The record of ``stage`` in run ``run_id``, from its committed ``manifest``."""
    inputs, rows_in = _rows_in(stage)
    committed_by = str(manifest.get("run_id") or "")
    outputs = manifest.get("outputs") or {}
    duration = manifest.get("duration_s")
    return StageRecord(
        dag_id=stage.dag_id,
        run_id=run_id,
        stage=stage.name,
        kind=stage.kind,
        fingerprint=stage.fingerprint,
        outcome="ran" if committed_by and committed_by == run_id else "hit",
        stage_dir=stage.stage_dir,
        # a partitioned stage has no one checkpoint: its partitions' folder (each partition's is there)
        checkpoint=f"{stage.stage_dir}/{PARTITIONS_DIR}" if stage.partitioned else stage.checkpoint_dir,
        committed_by=committed_by,
        started=str(manifest.get("started") or ""),
        finished=str(manifest.get("finished") or ""),
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        recorded=datetime.now(UTC).isoformat(),
        try_number=try_number,
        outputs=dict(stage.outputs) or {k: IOType(v.get("type", "table")) for k, v in outputs.items()},
        rows={k: int(v) for k, v in (manifest.get("rows") or {}).items() if isinstance(v, int)},
        rows_in=rows_in,
        params=stage.params_json(),
        run_params=dict(stage.run_params),
        inputs=inputs,
        metrics=dict(manifest.get("metrics") or {}),
    )


def write_stage_record(root: str, record: StageRecord) -> str:
    """Write ``record`` under the storage root (locally a temporary sibling renamed into place); its path."""
    path = f"{run_dir(root, record.dag_id, record.run_id)}/{record.stage}.json"
    storage.write_text(path, record.model_dump_json(indent=2))
    return path


def parse_record(text: str, where: str) -> StageRecord:
    """One record from its JSON; RecordError naming ``where`` when it is not a record of this version."""
    try:
        return StageRecord.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"]) or "the record"
        raise RecordError(
            f"{where}: not a dagspec run record (version {RECORD_VERSION}): {at}: {first['msg']}"
        ) from None


def read_run(root: str, dag_id: str, run_id: str) -> dict[str, StageRecord]:
    """Stage name -> record, for every stage of the run that recorded one (empty: none did)."""
    folder = run_dir(root, dag_id, run_id)
    found: dict[str, StageRecord] = {}
    for name in storage.list_names(folder):
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = f"{folder}/{name}"
        record = parse_record(storage.read_text(path) or "", path)
        if record.run_id != run_id or record.dag_id != dag_id:
            raise RecordError(f"{path}: records run {record.run_id!r} of {record.dag_id}, not {run_id!r}")
        found[record.stage] = record
    return found
