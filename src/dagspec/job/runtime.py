"""Running one resolved stage: take the lease, check the inputs, call the kind, commit the checkpoint.

The commit protocol itself lives in ``dagspec.checkpoint``; this module decides when to use it:
a valid checkpoint (and, for an export, a matching published copy) is a hit; otherwise the
attempt takes the fingerprint's lease, writes every output under a temporary directory, then
commits. A second attempt of the same fingerprint waits for the lease and, finding a committed
checkpoint, discards nothing and succeeds as a hit.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagspec.errors import DagspecError, StageFailedError
from dagspec.job.session import server_record
from dagspec.kinds.base import Inputs, InputSource, IOType, StageContext
from dagspec.kinds.catalog import Catalog, load_catalog
from dagspec.plan.fingerprint import data_identity
from dagspec.plan.reasons import is_hit
from dagspec.plan.resolve import ResolvedInput, ResolvedStage
from dagspec.processes import own_peak_rss_mb

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("dagspec.stage")


@dataclass
class StageRun:
    """What running a stage did: ``hit`` (nothing to do) or ``committed``, and the manifest."""

    outcome: str
    manifest: dict[str, Any] = field(default_factory=dict)


def read_inputs(spark: SparkSession, stage: ResolvedStage) -> Inputs:
    """Tables as DataFrames over the committed Parquet; files inputs as their directory path."""
    inputs: dict[str, DataFrame | str] = {}
    for role, source in stage.inputs.items():
        if source.is_window:  # its partitions as one table
            inputs[role] = _read_parts(spark, stage, role, source)
            continue
        source.checkpoint.require([source.output], f"stage {stage.name!r}, input {role!r} ({source.stage})")
        if source.content and source.checkpoint.content(source.output) != source.content:
            # the key holds the content planned; a forced rerun of the upstream replaced it since
            raise StageFailedError(
                f"stage {stage.name!r}: input {role!r} ({source.stage}.{source.output}) was recomputed with other "
                "content after this stage was planned; run it again"
            )
        inputs[role] = spark.read.parquet(source.path) if source.type == IOType.TABLE else source.path
    return Inputs(inputs)


def _read_parts(spark: SparkSession, stage: ResolvedStage, role: str, source: ResolvedInput) -> DataFrame:
    for part in source.parts:
        part.checkpoint.require([part.output], f"stage {stage.name!r}, input {role!r} ({part.stage} {part.partition})")
        if part.content and part.checkpoint.content(part.output) != part.content:
            raise StageFailedError(
                f"stage {stage.name!r}: input {role!r} ({part.stage} partition {part.partition}) was recomputed with "
                "other content after this stage was planned; run it again"
            )
    if not source.parts:
        raise StageFailedError(
            f"stage {stage.name!r}: input {role!r} reads partitions of {source.stage!r}, but its window holds none "
            "(no partition committed or in the run's scope)"
        )
    return spark.read.parquet(*[part.path for part in source.parts])


def _check_source_files(stage: ResolvedStage) -> None:
    """The files a source stage reads must be the ones its fingerprint was computed from."""
    if not stage.source_files:
        return
    planned = stage.key.get("data") or {}
    current, _ = data_identity(stage.source_files, Path(stage.home))
    changed = sorted(p for p in stage.source_files if current.get(p) != planned.get(p))
    if changed:
        raise StageFailedError(
            f"stage {stage.name!r}: input files changed after planning: {', '.join(changed[:5])}; run it again"
        )


def run_stage(
    spark: SparkSession, stage: ResolvedStage, *, force: bool = False, catalog: Catalog | None = None
) -> StageRun:
    """Run one stage unless it is a hit; commit its checkpoint. Returns what happened."""
    catalog = catalog or load_catalog(Path(stage.home))
    kind = catalog.get(stage.kind)
    if kind is None:
        raise DagspecError(f"stage {stage.name!r}: {catalog.unknown_message(stage.kind)}")
    if stage.pending:
        raise DagspecError(
            f"stage {stage.name!r} was planned before its upstream {', '.join(stage.pending)} committed "
            "(its key holds their content): resolve it again now that they have run"
        )
    if not force and is_hit(stage):
        return StageRun("hit", stage.checkpoint.manifest() or {})
    with stage.checkpoint.lease() as lease:
        if not force and is_hit(stage):
            log.info("stage %s: another attempt committed %s meanwhile", stage.name, stage.checkpoint_dir)
            return StageRun("hit", stage.checkpoint.manifest() or {})
        _check_source_files(stage)
        work_dir = stage.checkpoint.new_attempt_dir(lease.attempt)
        from pyspark import StorageLevel

        context = StageContext(
            spark=spark,
            dag_id=stage.dag_id,
            stage_name=stage.name,
            fingerprint=stage.fingerprint,
            home=Path(stage.home),
            storage_root=stage.storage_root,
            work_dir=work_dir,
            scratch_root=stage.checkpoint.scratch_path,
            sources={
                r: InputSource(
                    i.stage, i.output, i.path, i.type, i.fingerprint, i.content, tuple(p.path for p in i.parts)
                )
                for r, i in stage.inputs.items()
            },
            source_files=list(stage.source_files),
            publish_path=stage.publish_path,
            written_name=stage.written_name,
            cache_level=StorageLevel.DISK_ONLY,
        )
        started = datetime.now(UTC)
        t0, cpu0 = time.perf_counter(), _cpu_seconds()
        inputs = read_inputs(spark, stage)
        # an input returned unchanged (check passes its table through) is linked, not rewritten
        unchanged = {  # a window's partitions: each one's files linked side by side
            id(df): stage.inputs[role].path or [(p.partition, p.path) for p in stage.inputs[role].parts]
            for role, df in inputs.items()
            if not isinstance(df, str)
        }
        try:
            outputs: Mapping[str, DataFrame] = kind.function(inputs, stage.params, context) or {}
            manifest_outputs = _write_outputs(spark, stage, context, outputs, unchanged)
        finally:
            context.release()
        manifest = {
            **_identity(stage),
            "outputs": manifest_outputs,
            "rows": {name: o["rows"] for name, o in manifest_outputs.items() if "rows" in o},
            "started": started.isoformat(),
            "finished": datetime.now(UTC).isoformat(),
            "duration_s": round(time.perf_counter() - t0, 3),
            "driver_cpu_s": round(_cpu_seconds() - cpu0, 3),
            "driver_peak_rss_mb": round(own_peak_rss_mb(), 1),
            "spark": {"version": spark.version, **_driver_info(spark)},
            "server": server_record(spark),  # the Spark Connect server that computed it; None: own driver
            "metrics": context.metrics,
        }
        committed = stage.checkpoint.commit(work_dir, manifest, replace=force or stage.checkpoint.state().done)
        return StageRun("committed" if committed else "hit", manifest)


def _identity(stage: ResolvedStage) -> dict[str, Any]:
    """What a manifest says the checkpoint is: the stage, its key, and each input it read."""
    return {
        "dag_id": stage.dag_id,
        "stage": stage.name,
        "fingerprint": stage.fingerprint,
        "kind": stage.kind,
        "params": stage.params_json(),
        "key": stage.key,
        "run_params": stage.run_params,
        "run_id": stage.run_id,  # the run that computed it: its run record says `ran`, others' `hit`
        "inputs": {
            role: {
                "stage": i.stage,
                "output": i.output,
                "fingerprint": i.fingerprint,
                "path": i.path,
                "content": i.content,
                "committed": i.committed,
                **({"partitions": {p.partition: p.content for p in i.parts}} if i.is_window else {}),
            }
            for role, i in stage.inputs.items()
        },
    }


def _write_outputs(
    spark: SparkSession,
    stage: ResolvedStage,
    context: StageContext,
    outputs: Mapping[str, DataFrame],
    unchanged: Mapping[int, str | list[tuple[str, str]]],
) -> dict[str, Any]:
    """Write the returned tables as Parquet; check every declared output exists; describe them.

    A returned DataFrame that is one of the stage's input DataFrames itself (``unchanged``: its
    id -> the input's committed folder) is the same data: its files are linked, not re-encoded.
    """
    from dagspec import footers, storage

    for name, df in outputs.items():
        if name not in stage.outputs:
            raise DagspecError(f"kind {stage.kind!r} returned an undeclared output {name!r}")
        if id(df) in unchanged:
            source = unchanged[id(df)]
            if isinstance(source, str):
                storage.link_tree(source, context.output_path(name))
            else:
                storage.link_parts(source, context.output_path(name))
        else:
            df.write.mode("error").parquet(context.output_path(name))
    described: dict[str, Any] = {}
    for name, type_ in stage.outputs.items():
        path = context.output_path(name)
        if not storage.exists(path):
            raise DagspecError(f"stage {stage.name!r} did not write its output {name!r}")
        if type_ == IOType.TABLE:
            rows, schema = footers.describe(spark, path)
            if name in context.expected_rows and rows != context.expected_rows[name][0]:
                rows, schema = _rewrite(spark, stage, context, name, rows)
            described[name] = {"type": type_.value, "rows": rows, "schema": schema}
        else:
            described[name] = {"type": type_.value}
    return described


def _rewrite(spark: SparkSession, stage: ResolvedStage, context: StageContext, name: str, rows: int) -> tuple[int, str]:
    """Output ``name`` holds ``rows`` rows, not the ones the kind expects: write its fallback plan instead."""
    from dagspec import footers, storage

    expected, otherwise = context.expected_rows[name]
    log.info(
        "stage %s: output %s holds %d rows, not %d: writing it again by the exact plan",
        stage.name,
        name,
        rows,
        expected,
    )
    path = context.output_path(name)
    storage.delete(path)
    otherwise().write.mode("error").parquet(path)
    context.metrics.setdefault("rewritten", {})[name] = {"rows_first": rows, "expected": expected}
    rows, schema = footers.describe(spark, path)
    if rows != expected:
        raise StageFailedError(
            f"stage {stage.name!r}: output {name!r} holds {rows} rows where {expected} were expected"
        )
    return rows, schema


def _driver_info(spark: SparkSession) -> dict[str, Any]:
    """The application that computed the stage (its Spark UI in the History Server) and the tags of
    the stage's jobs there: a Connect server's one application runs every stage's jobs."""
    try:
        context = spark.sparkContext
        return {"master": str(context.master), "app_id": str(context.applicationId)}
    except Exception:  # Spark Connect sessions have no SparkContext
        with contextlib.suppress(Exception):  # a courtesy of the manifest, like the server record's fields
            tags = sorted(spark.getTags())
            return {"master": "spark connect", "app_id": str(spark.conf.get("spark.app.id")), "job_tags": tags}
        return {"master": "spark connect", "app_id": ""}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
