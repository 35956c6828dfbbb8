"""Under a real triggerer, files landing in a watched folder queue exactly one run of the spec.

The DAG file's DAGs are serialized into a fresh DB, the spec unpaused and serialized again (Airflow
registers the watchers' triggers of unpaused DAGs only, as the dag-processor does on its next parse), and ``airflow triggerer`` started; two files land at once; the triggerer's
``NewFilesTrigger`` must make one asset event listing both, and no more on later polls; the
scheduler's own step that creates DAG runs then makes one asset-triggered run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.airflow.test_asset_trigger import BIN, CREATE_RUNS, READ, _env, _rows, _run

pytestmark = pytest.mark.integration
EVENTS = "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = 'files_c.new_files' ORDER BY e.id"


def _wait_for_events(base: Path, triggerer: subprocess.Popen[bytes], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert triggerer.poll() is None, (base / "triggerer.log").read_text()[-3000:]
        found = [row[0] for row in sorted(_rows(base, EVENTS))]
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"no asset event within {timeout} s:\n{(base / 'triggerer.log').read_text()[-3000:]}")


def test_two_new_files_make_one_run_through_the_triggerer(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (tmp_path / "pipelines").mkdir()
    schedule = f'schedule: {{files: "{incoming}/day_*.tsv", poll_interval: 1}}\n'
    (tmp_path / "pipelines" / "files_c.yaml").write_text(schedule + READ)
    env = {**_env(tmp_path), "DAGSPEC_STORAGE_ROOT": str(tmp_path / "storage"), "DAGSPEC_WATCH_ROOTS": str(incoming)}
    _run([str(BIN / "dagspec"), "init"], env)
    _run([str(BIN / "airflow"), "dags", "reserialize"], env)
    _run([str(BIN / "airflow"), "dags", "unpause", "files_c"], env)
    _run([str(BIN / "airflow"), "dags", "reserialize"], env)  # Airflow registers the watchers of unpaused DAGs
    triggers = _rows(tmp_path, "SELECT classpath FROM trigger")
    assert triggers == {("dagspec.airflow.new_files.NewFilesTrigger",)}

    with (tmp_path / "triggerer.log").open("wb") as log:
        triggerer = subprocess.Popen(
            [str(BIN / "airflow"), "triggerer"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        for day in ("day_00.tsv", "day_01.tsv"):
            (incoming / day).write_text("1\t2\n")
        events = _wait_for_events(tmp_path, triggerer, timeout=120)
        time.sleep(4)  # several more polls: nothing new, no more events
        assert [row[0] for row in _rows(tmp_path, EVENTS)] == events
    finally:
        os.killpg(triggerer.pid, signal.SIGTERM)
        triggerer.wait(timeout=60)
    assert len(events) == 1
    payload = json.loads(events[0])
    assert sorted(payload["payload"]["files"]) == [str(incoming / "day_00.tsv"), str(incoming / "day_01.tsv")]

    _run([str(BIN / "python"), "-c", CREATE_RUNS], env)
    assert _rows(tmp_path, "SELECT dag_id, run_type FROM dag_run") == {("files_c", "asset_triggered")}
    assert len(_rows(tmp_path, "SELECT id FROM dag_run")) == 1
