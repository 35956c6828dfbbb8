"""The spark-submit entry point of every stage: ``run_stage.py [--force] '<resolved stage JSON>'``."""

from __future__ import annotations

import logging
import os
import sys

from dagspec.errors import DagspecError
from dagspec.job.runtime import run_stage
from dagspec.job.session import create_session
from dagspec.plan.resolve import ResolvedStage

log = logging.getLogger("dagspec.stage")


def main(argv: list[str]) -> int:
    """Parse the argument, start the session, run the stage; 0 on success or a hit, 1 on failure."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    force = "--force" in argv
    args = [a for a in argv if a != "--force"]
    if len(args) != 1:
        print("usage: run_stage.py [--force] STAGE_JSON", file=sys.stderr)
        return 2
    stage = ResolvedStage.from_json(args[0])
    os.environ.setdefault("DAGSPEC_HOME", stage.home)
    spark = create_session(f"dagspec.{stage.dag_id}.{stage.name}")
    try:
        result = run_stage(spark, stage, force=force)
    except DagspecError as exc:
        log.error("stage %s failed: %s", stage.name, exc)
        return 1
    finally:
        spark.stop()
    if result.outcome == "hit":
        log.info("checkpoint hit: %s", stage.checkpoint_dir)
    else:
        log.info(
            "committed %s (%s rows) in %.1f s",
            stage.checkpoint_dir,
            result.manifest["rows"],
            result.manifest["duration_s"],
        )
    return 0
