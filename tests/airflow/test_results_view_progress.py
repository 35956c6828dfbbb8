"""The run page shows a running stage's latest progress, as its job keeps it beside the checkpoints.

The stage's attempt holds its lease (``Checkpoint.lease``, as the job does) and its progress file is
written by the job's own reporter; a file left by an attempt whose lease is gone is not shown.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dagspec.airflow.ui import app as view
from dagspec.airflow.ui.results import RunInfo, TaskInfo
from dagspec.checkpoint import Checkpoint
from dagspec.job.progress import ProgressReporter
from dagspec.plan.progress import progress_path
from tests.conftest import REPO

DAG = "topology_classifier"
FINGERPRINT = "0123456789abcdef"


class RunningRun:
    """One run whose hlf_classifier task runs (a stand-in for Airflow's DB); nothing recorded yet."""

    def run(self, dag_id: str, run_id: str) -> RunInfo | None:
        return RunInfo(DAG, run_id, "running", {}, None, datetime(2026, 12, 5, tzinfo=UTC)) if dag_id == DAG else None

    def tasks(self, dag_id: str, run_id: str) -> dict[str, TaskInfo]:
        return {"hlf_classifier": TaskInfo("running"), "split": TaskInfo("success", 3.0)}

    def recent(self, dag_id: str, limit: int) -> list[RunInfo]:
        return []


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Path]]:
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    shutil.copy(REPO / "pipelines" / f"{DAG}.yaml", pipelines)
    monkeypatch.setenv("DAGSPEC_HOME", str(REPO))
    monkeypatch.setenv("DAGSPEC_PIPELINES", str(pipelines))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "storage"))
    app = view.create_app()
    app.dependency_overrides[view.run_store] = RunningRun
    app.dependency_overrides[view.can_read_runs] = lambda: None
    yield TestClient(app), tmp_path / "storage" / DAG / "hlf_classifier"


def test_a_running_stage_shows_its_latest_progress_while_its_attempt_holds_the_lease(
    client: tuple[TestClient, Path],
) -> None:
    app, stage_dir = client
    reporter = ProgressReporter("hlf_classifier", FINGERPRINT, str(stage_dir), 10.0, io.StringIO())
    reporter.on_training("epoch", 4, 10, {"val_loss": 0.2871})
    progress = reporter.snapshot()
    assert progress is not None
    with Checkpoint(str(stage_dir), FINGERPRINT).lease():
        reporter.emit(progress)
        page = app.get(f"/dags/{DAG}/runs/manual__now").text
        assert '<div class="progress"' in page and "epoch 4/10 val_loss=0.2871" in page
        row = page.split(">hlf_classifier</a>", 1)[1].split("</tr>", 1)[0]
        assert "<td>train_keras</td>" in row  # no record yet: the spec's kind
    # the attempt is gone (killed: its file stays behind), its progress is no longer shown
    assert Path(progress_path(str(stage_dir), FINGERPRINT)).exists()
    assert "epoch 4/10" not in app.get(f"/dags/{DAG}/runs/manual__now").text
