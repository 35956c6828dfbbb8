"""A run's partitions: listed when a spec is resolved, so each task sees the files there are now.

``spec.partitions.files`` is rendered with the run's context, listed by Spark's rules
(``dagspec.storage.list_files``) and each file keyed by its captured part; declared ``values``
are taken as they are. A run's scope (the run param ``partitions``: ``A..B`` or one key) and its
Airflow partition key (``dag_run.partition_key``: the run stands for that partition and the ones
before it) decide which partitions it may compute; partitions outside it are read only when they
are committed already.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagspec import storage
from dagspec.errors import StageConfigError
from dagspec.spec.models import PipelineSpec
from dagspec.spec.partitions import PARTITIONS_PARAM, check_key, glob_of, in_scope, key_of, natural, parse_scope
from dagspec.spec.templates import is_templated, render

PARALLEL_VAR = "DAGSPEC_PARTITION_PARALLEL"  # partitions a stage computes at once (dagspec backfill --parallel)
RUN_PARTITION_KEY = "partition_key"  # Airflow's context key: the run's partition (dag_run.partition_key)


@dataclass(frozen=True)
class Partition:
    """One partition: its key and, for file partitions, its file."""

    key: str
    path: str | None = None

    def context(self) -> dict[str, Any]:
        """What ``{{ partition.* }}`` renders to."""
        return {"key": self.key, "path": self.path or ""}


@dataclass(frozen=True)
class RunScope:
    """Which partitions a run may compute: keys within ``scope`` and not after ``run_key``."""

    scope: tuple[str | None, str | None] | None = None
    run_key: str | None = None

    def allows(self, key: str) -> bool:
        if self.run_key is not None and natural(key) > natural(self.run_key):
            return False
        return in_scope(key, self.scope)

    @property
    def limited(self) -> bool:
        """A run limited to some partitions by its param (a backfill): it computes partitioned stages only."""
        return self.scope is not None


def run_scope(spec: PipelineSpec, context: Mapping[str, Any]) -> RunScope:
    """The scope of the run of ``spec`` whose template context is ``context``; a spec without
    partitions has none (its own param named ``partitions``, if any, is just its param)."""
    if spec.partitions is None:
        return RunScope()
    params = context.get("params") or {}
    key = context.get(RUN_PARTITION_KEY)
    return RunScope(parse_scope(params.get(PARTITIONS_PARAM)), str(key) if key else None)


def list_partitions(
    spec: PipelineSpec, context: Mapping[str, Any], home: Path, base: str | None = None
) -> list[Partition]:
    """The spec's partitions now, in natural key order; a relative ``files`` glob is listed under
    ``base`` when given (the committed files output of ``partitions.of``)."""
    declared = spec.partitions
    if declared is None:
        return []
    if declared.values is not None:
        return [Partition(str(v)) for v in sorted({str(v) for v in declared.values}, key=natural)]
    pattern = str(declared.files)
    if is_templated(pattern):
        try:
            pattern = str(render(pattern, context))
        except Exception as exc:  # the sandbox's errors have many types; each reads well as text
            raise StageConfigError(f"{spec.source}: partitions.files: {exc}") from None
    relative = not (storage.is_uri(pattern) or pattern.startswith("/"))
    if base is not None and relative:
        pattern = f"{base.rstrip('/')}/{pattern}"
    resolved = storage.resolve_input_path(pattern, home)
    found: dict[str, str] = {}
    for info in storage.list_files(storage.resolve_input_path(glob_of(pattern), home)):
        key = key_of(resolved, info.path)
        if key is None:
            continue
        try:
            check_key(key)
        except ValueError as exc:
            raise StageConfigError(f"{spec.source}: partitions.files: {info.path}: {exc}") from None
        if key in found:
            raise StageConfigError(
                f"{spec.source}: partitions.files: {found[key]} and {info.path} are both partition {key!r}: "
                "one file per partition (capture a longer part of the name with {name})"
            )
        found[key] = info.path
    return [Partition(k, found[k]) for k in sorted(found, key=natural)]


def shown_keys(keys: list[str], limit: int = 6) -> str:
    """``day_01, day_02, ... (12 more)``: keys for a message, a few when there are many."""
    if len(keys) <= limit:
        return ", ".join(keys)
    return f"{', '.join(keys[: limit - 1])}, ... {keys[-1]} ({len(keys)} in all)"


def partitioned_manifest(partitions: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """What a partitioned stage committed, as one manifest would say it (its run record, its asset
    events): rows and rejected rows summed over its partitions, which partitions this run computed.

    ``partitions``: key -> that partition's resolved stage (anything with ``checkpoint.manifest()``).
    """
    rows: dict[str, int] = {}
    rejected = 0
    ran: list[str] = []
    started: list[str] = []
    finished: list[str] = []
    duration = 0.0
    for key, part in partitions.items():
        manifest = part.checkpoint.manifest() or {}
        for output, count in (manifest.get("rows") or {}).items():
            rows[output] = rows.get(output, 0) + int(count)
        rejected += int((manifest.get("metrics") or {}).get("rows_rejected") or 0)
        if run_id and manifest.get("run_id") == run_id:
            ran.append(key)
            duration += float(manifest.get("duration_s") or 0)
            started.append(str(manifest.get("started") or ""))
            finished.append(str(manifest.get("finished") or ""))
    return {
        "run_id": run_id if ran else "",
        "rows": rows,
        "started": min(started) if started else "",
        "finished": max(finished) if finished else "",
        "duration_s": round(duration, 3) if ran else None,
        "metrics": {
            "rows_rejected": rejected,
            "partitions": len(partitions),
            "partitions_computed": ran,
            # what the run stands for, partition by partition (the UI checks each is still committed)
            "partition_fingerprints": {key: part.fingerprint for key, part in partitions.items()},
        },
    }
