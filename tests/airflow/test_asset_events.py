"""Asset events say what a stage made: a real `airflow dags test` run, read back from Airflow's DB."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CRITEO_SAMPLE, REPO

pytestmark = pytest.mark.integration
DAGSPEC = str(Path(sys.executable).parent / "dagspec")

SPEC = f"""
dag_id: asset_events
schedule: null
start_date: 2026-01-01
default_args: {{retries: 2, retry_delay: 1}}  # a shared checkout edited meanwhile restarts the server
spark: {{conn_id: spark_default, conf: {{spark.sql.shuffle.partitions: 2}}}}
stages:
  raw: {{kind: read, params: {{format: tsv, path: {CRITEO_SAMPLE}, schema: criteo}}}}
  split: {{kind: split, inputs: {{data: raw}}, params: {{fractions: {{train: 0.8, test: 0.2}}, seed: 42}}}}
  train: {{kind: ctr_features, inputs: {{data: split.train}}, params: {{mode: as_is}}}}
  test: {{kind: ctr_features, inputs: {{data: split.test}}, params: {{mode: as_is}}}}
  model: {{kind: train_xgboost, inputs: {{train: train}}, params: {{workers: 1, num_round: 5, nthread: 1}}}}
  scores: {{kind: evaluate, inputs: {{model: model, data: test}}}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("asset-events")
    (base / "pipelines").mkdir()
    (base / "pipelines" / "asset_events.yaml").write_text(SPEC)
    return {"spec": base / "pipelines" / "asset_events.yaml", "storage": base / "storage", "airflow": airflow_home}


def dagspec_run(project: dict[str, Path]) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "DAGSPEC")) or k in ("DAGSPEC_CONNECT_PORT", "DAGSPEC_RUN_DIR")
    }
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(project["airflow"]), DAGSPEC_MODE="connect")
    cmd = [DAGSPEC, "run", str(project["spec"]), "--storage-root", str(project["storage"])]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def events(project: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """Asset name -> the extra of each of its events, oldest first."""
    with sqlite3.connect(project["airflow"] / "airflow.db") as db:
        rows = db.execute(
            "SELECT a.name, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE e.source_dag_id = 'asset_events' ORDER BY e.id"
        ).fetchall()
    found: dict[str, list[dict[str, Any]]] = {}
    for name, extra in rows:
        found.setdefault(name, []).append(json.loads(extra))
    return found


def manifest(project: dict[str, Path], extra: dict[str, Any]) -> dict[str, Any]:
    return json.loads((Path(extra["checkpoint"]).parent / "manifest.json").read_text())


def test_each_output_event_carries_rows_fingerprint_checkpoint_and_metrics(project) -> None:
    dagspec_run(project)
    first = {name: extras[-1] for name, extras in events(project).items()}
    assert set(first) == {
        f"asset_events.{stage}.{output}"
        for stage, output in [("raw", "data"), ("split", "train"), ("split", "test"),
                              ("train", "data"), ("test", "data"), ("model", "model"), ("scores", "report")]
    }  # fmt: skip
    raw = first["asset_events.raw.data"]
    committed = manifest(project, raw)
    assert raw["fingerprint"] == committed["fingerprint"]
    assert Path(raw["checkpoint"]) == project["storage"] / "asset_events" / "raw" / committed["fingerprint"] / "data"
    assert raw["checkpoint"].endswith("/data") and Path(raw["checkpoint"]).is_dir()
    assert raw["rows_out"] == committed["rows"]["data"] and raw["rows_out"] > 0
    assert raw["rows_rejected"] == committed["metrics"]["rows_rejected"]
    assert (
        first["asset_events.split.train"]["rows_out"] + first["asset_events.split.test"]["rows_out"] == raw["rows_out"]
    )
    model = first["asset_events.model.model"]
    assert model["train_time_s"] > 0 and model["rounds"] == 5
    scores = first["asset_events.scores.report"]
    assert 0 <= scores["roc_auc"] <= 1 and scores["log_loss"] > 0
    assert scores["roc_auc"] == manifest(project, scores)["metrics"]["roc_auc"]


def test_a_checkpoint_hit_says_what_the_run_that_committed_it_said(project) -> None:
    dagspec_run(project)
    both = events(project)
    assert all(len(extras) == 2 for extras in both.values()), {k: len(v) for k, v in both.items()}
    assert {name: extras[1] for name, extras in both.items()} == {name: extras[0] for name, extras in both.items()}
