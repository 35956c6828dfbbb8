"""Running a partitioned stage: each partition the task was given, a few at once, in one session.

Each partition is a stage of its own (its key, its lease, its checkpoint: ``dagspec.job.runtime``),
so one failing leaves the others' commits alone; each thread has a session of its own; the stage fails when any partition did, after
every other partition has had its go. ``partitions.parallel`` of the spec (or
``DAGSPEC_PARTITION_PARALLEL``, e.g. from ``dagspec backfill --parallel``) bounds how many run at
once: Spark runs their jobs side by side in the one session.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from queue import Queue
from typing import TYPE_CHECKING

from dagspec.job.runtime import StageRun, run_stage
from dagspec.job.session import release_sibling, sibling_session
from dagspec.plan.partitions import PARALLEL_VAR
from dagspec.plan.resolve import ResolvedStage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dagspec.stage")


def parallelism(stage: ResolvedStage) -> int:
    """How many partitions run at once: the environment's override, else the spec's."""
    given = os.environ.get(PARALLEL_VAR, "").strip()
    return max(1, int(given)) if given.isdigit() else max(1, stage.parallel)


def run_partitions(
    spark: SparkSession,
    stage: ResolvedStage,
    *,
    force: bool,
    report: Callable[[ResolvedStage, Exception], None],
    parallel: int | None = None,
    attach: Callable[[SparkSession], None] | None = None,
) -> int:
    """Run every partition of ``stage``; 0 when all committed or hit, 1 when any failed (reported)."""
    parts = list(stage.partitions.values())
    width = min(parallel or parallelism(stage), max(1, len(parts)))
    # a session per thread: a kind's temporary views (sql registers its inputs as views) and session
    # settings are a session's, and two partitions must not replace each other's
    sessions: Queue[SparkSession] = Queue()
    sessions.put(spark)
    siblings = [sibling_session(spark) for _ in range(width - 1)]
    for sibling in siblings:
        if attach is not None:  # the stage's progress covers every partition's session
            attach(sibling)
        sessions.put(sibling)

    def one(part: ResolvedStage) -> bool:
        session = sessions.get()
        try:
            result: StageRun = run_stage(session, part, force=force)
        except Exception as exc:  # any failure of one partition is reported, and the others go on
            report(part, exc)
            return False
        finally:
            sessions.put(session)
        rows = result.manifest.get("rows") or {}
        log.info("partition %s of %s: %s (%s rows)", part.partition, stage.name, result.outcome, rows)
        return True

    try:
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="partition") as pool:
            done = list(pool.map(one, parts))
    finally:
        for sibling in siblings:
            release_sibling(sibling)
    failed = [p.partition for p, ok in zip(parts, done, strict=True) if not ok]
    if failed:
        log.error("stage %s: %d of %d partitions failed: %s", stage.name, len(failed), len(parts), ", ".join(failed))
        return 1
    log.info("stage %s: %d partitions committed or found committed", stage.name, len(parts))
    return 0
