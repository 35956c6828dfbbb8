"""A partitioned stage's progress over Spark Connect covers every partition's session: partitions
run side by side in sibling sessions (``dagspec.job.partitions``), and a Connect client reports
progress per session, so the stage's reporter is attached to each sibling."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dagspec.job.connect_auth import server_token, with_token
from dagspec.job.connect_server import ensure_server
from dagspec.job.partitions import run_partitions
from dagspec.job.progress import ProgressReporter, watch_progress
from dagspec.job.session import create_session, release_sibling, sibling_session
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import write_spec

pytestmark = pytest.mark.integration

SPEC = """
partitions: {values: [a, b]}
stages:
  part:
    kind: sql
    partitioned: true
    params: {query: "SELECT '{{ partition.key }}' AS k, COUNT(*) AS n FROM range(1000)"}
"""


def scenario(folder: Path) -> None:
    """The test, in a process of its own: a process holding a classic session (another test file's,
    in the same pytest worker) cannot open a Connect session."""
    spec = load_spec(write_spec(folder / "pipelines", SPEC), "pipelines/pipe.yaml")
    stage = resolve_pipeline(spec, default_context(spec, {}))["part"]
    ended: list[str | None] = []  # the operations whose end reached the stage's reporter

    def record(
        self: ProgressReporter, stages: Any, inflight: int, operation_id: str | None = None, done: bool = False
    ) -> None:
        if done:
            ended.append(operation_id)

    ProgressReporter.__call__ = record  # type: ignore[method-assign]  # this process only
    spark = create_session("progress-partitions", remote=with_token(ensure_server(REPO), server_token(REPO)))
    attached: list[Any] = []
    try:
        with watch_progress(spark, stage, connect=True) as reporter:
            assert reporter is not None

            def attach(session: Any) -> None:
                attached.append(session)
                reporter.attach(session)

            def fail(part: ResolvedStage, exc: Exception) -> None:
                raise exc

            assert run_partitions(spark, stage, force=False, report=fail, parallel=2, attach=attach) == 0
            assert len(attached) == 1 and attached[0] is not spark  # its one sibling session, attached
            # what attaching does: an operation of another session reaches the stage's reporter
            other = sibling_session(spark)
            try:
                before = len(ended)
                other.range(3).count()
                unattached = len(ended) - before
                reporter.attach(other)
                assert other.range(3).count() == 3
                assert unattached == 0 and len(ended) == before + 1
            finally:
                release_sibling(other)
    finally:
        spark.stop()


def test_every_partitions_session_reports_to_the_stages_progress(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DAGSPEC_STORAGE_ROOT": str(tmp_path / "storage"),
        "DAGSPEC_PROGRESS_INTERVAL": "600",  # the sources only: no line is due
    }
    code = f"from pathlib import Path; from tests.job.test_progress_partitions import scenario; scenario(Path({str(tmp_path)!r}))"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
