"""A run's page is that run's history: two real `dagspec run`s of a tiny spec whose input file grows
in between, then the results view (its routes, over FastAPI's TestClient, on the runs' own Airflow DB)
shows each run's own fingerprints, rows and metrics, as its Airflow asset events say.

Before run records, the older run's page resolved the spec again with today's input file, so it
listed the newer run's fingerprints and metrics.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dagspec.airflow.ui import app as view
from dagspec.airflow.ui.results import RunInfo, TaskInfo
from dagspec.plan.history import RUNS_DIR, read_run, run_folder_name
from tests.conftest import REPO
from tests.helpers import DAGSPEC

pytestmark = pytest.mark.integration
DAG = "run_history"
SPEC = """\
dag_id: run_history
schedule: null
start_date: 2026-01-01
default_args: {{retries: 0, retry_delay: 1}}
params:
  input: {{type: string, default: {input}}}
storage: {{root: .dagspec/storage}}
stages:
  raw: {{kind: read, params: {{format: csv, header: true, path: "{{{{ params.input }}}}", schema: "x INT, label INT"}}}}
  checked:
    kind: check
    inputs: {{data: raw}}
    params: {{severity: warn, columns: {{label: {{not_null: true}}}}}}
"""


class SqliteRuns:
    """The runs and task instances of the project's Airflow DB (the `RunStore` of the API server reads
    the same rows through SQLAlchemy)."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def _runs(self, where: str, args: tuple[Any, ...]) -> list[RunInfo]:
        with sqlite3.connect(self.db) as con:
            rows = con.execute(f"SELECT run_id, state, conf, start_date FROM dag_run WHERE {where}", args).fetchall()
        return [
            RunInfo(DAG, run_id, state, {}, None, datetime.fromisoformat(started) if started else None)
            for run_id, state, _, started in rows
        ]

    def run(self, dag_id: str, run_id: str) -> RunInfo | None:
        found = self._runs("dag_id = ? AND run_id = ?", (dag_id, run_id))
        return found[0] if found else None

    def tasks(self, dag_id: str, run_id: str) -> dict[str, TaskInfo]:
        with sqlite3.connect(self.db) as con:
            rows = con.execute(
                "SELECT task_id, state, duration FROM task_instance WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
            ).fetchall()
        return {task: TaskInfo(state, duration) for task, state, duration in rows}

    def recent(self, dag_id: str, limit: int) -> list[RunInfo]:
        return self._runs("dag_id = ? ORDER BY id DESC LIMIT ?", (dag_id, limit))


def _env(airflow_home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k == "DAGSPEC_CONNECT_PORT"
    }
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home), DAGSPEC_MODE="connect")
    return env


def _run(spec: Path, storage: Path, airflow_home: Path) -> str:
    """`dagspec run` the spec; the id of the run it made."""
    db = airflow_home / "airflow.db"
    cmd = [DAGSPEC, "run", str(spec), "--storage-root", str(storage)]
    done = subprocess.run(cmd, env=_env(airflow_home), capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(db) as con:
        (run_id,) = con.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (DAG,)
        ).fetchone()
    return str(run_id)


def _fingerprints(airflow_home: Path, run_id: str) -> dict[str, str]:
    """Stage -> the fingerprint its asset event of the run says it committed or found (Airflow's own record)."""
    with sqlite3.connect(airflow_home / "airflow.db") as con:
        rows = con.execute(
            "SELECT extra FROM asset_event WHERE source_dag_id = ? AND source_run_id = ?", (DAG, run_id)
        ).fetchall()
    return {extra["stage"]: extra["fingerprint"] for extra in (json.loads(text) for (text,) in rows)}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> dict[str, Any]:
    """Run A on a 4-line input, one line (with no label) appended, run B."""
    base = tmp_path_factory.mktemp("run-history")
    data = base / "input.csv"
    data.write_text("x,label\n1,0\n2,1\n3,0\n4,1\n")
    pipelines = base / "pipelines"
    pipelines.mkdir()
    spec = pipelines / f"{DAG}.yaml"
    spec.write_text(SPEC.format(input=data))
    storage = base / "storage"
    first = _run(spec, storage, airflow_home)
    records = storage / DAG / RUNS_DIR / run_folder_name(first)
    written = {p.name: p.read_bytes() for p in records.iterdir()}
    with data.open("a") as handle:
        handle.write("5,\n")
    second = _run(spec, storage, airflow_home)
    return {"a": first, "b": second, "storage": storage, "pipelines": pipelines, "a_records": written}


@pytest.fixture
def client(two_runs: dict[str, Any], airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    monkeypatch.setenv("DAGSPEC_HOME", str(REPO))
    monkeypatch.setenv("DAGSPEC_PIPELINES", str(two_runs["pipelines"]))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(two_runs["storage"]))
    app = view.create_app()
    app.dependency_overrides[view.run_store] = lambda: SqliteRuns(airflow_home / "airflow.db")
    app.dependency_overrides[view.can_read_runs] = lambda: None
    return TestClient(app)


def test_each_run_records_what_it_ran_and_a_later_run_rewrites_none_of_it(
    two_runs: dict[str, Any], airflow_home: Path
) -> None:
    a, b = (_fingerprints(airflow_home, two_runs[r]) for r in ("a", "b"))
    assert set(a) == set(b) == {"raw", "checked"}
    assert a["raw"] != b["raw"] and a["checked"] != b["checked"]  # the input grew: both stages ran again
    for run, events in ((two_runs["a"], a), (two_runs["b"], b)):
        records = read_run(str(two_runs["storage"]), DAG, run)
        assert {name: r.fingerprint for name, r in records.items()} == events
        assert {r.outcome for r in records.values()} == {"ran"}
        assert all(r.committed_by == run and Path(r.checkpoint, "_SUCCESS").exists() for r in records.values())
    folder = two_runs["storage"] / DAG / RUNS_DIR / run_folder_name(two_runs["a"])
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == two_runs["a_records"]


def test_the_older_runs_page_shows_its_own_fingerprints_rows_and_check_after_the_input_changed(
    two_runs: dict[str, Any], airflow_home: Path, client: TestClient
) -> None:
    a, b = (_fingerprints(airflow_home, two_runs[r]) for r in ("a", "b"))
    older = client.get(f"/dags/{DAG}/runs/{two_runs['a']}")
    assert older.status_code == 200, older.text
    assert all(fp in older.text for fp in a.values()) and not any(fp in older.text for fp in b.values())
    assert older.text.count('class="ran">ran<') == 2 and older.text.count('class="committed">committed<') == 2
    assert '<td class="num">4</td>' in older.text and '<td class="num">5</td>' not in older.text  # rows out
    newer = client.get(f"/dags/{DAG}/runs/{two_runs['b']}").text
    assert all(fp in newer for fp in b.values()) and '<td class="num">5</td>' in newer
    assert "0 null rows" in client.get(f"/dags/{DAG}/runs/{two_runs['a']}/stages/checked").text
    assert "1 null rows" in client.get(f"/dags/{DAG}/runs/{two_runs['b']}/stages/checked").text


def test_compare_gives_each_run_its_own_metrics(two_runs: dict[str, Any], client: TestClient) -> None:
    page = client.get(f"/dags/{DAG}/compare", params={"metric": "violations", "n": 2})
    assert page.status_code == 200, page.text
    rows = {run: page.text.split(f">{run}</a>", 1)[1].split("</tr>", 1)[0] for run in (two_runs["a"], two_runs["b"])}
    assert '<td class="num">0.0000</td>' in rows[two_runs["a"]]
    assert '<td class="num">1.0000</td>' in rows[two_runs["b"]]


def test_gc_keeps_the_run_records_and_the_page_says_the_checkpoint_is_gone(
    two_runs: dict[str, Any], airflow_home: Path, client: TestClient
) -> None:
    env = {**_env(airflow_home), "DAGSPEC_PIPELINES": str(two_runs["pipelines"])}
    cmd = [DAGSPEC, "gc", "--keep", "0", "--storage-root", str(two_runs["storage"])]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert RUNS_DIR not in done.stdout
    assert read_run(str(two_runs["storage"]), DAG, two_runs["a"])  # the older run's records stay
    # run A's checkpoints were unreached (today's input is B's): removed, and its page says so
    older = client.get(f"/dags/{DAG}/runs/{two_runs['a']}").text
    assert older.count('class="removed">removed<') == 2
    assert all(fp in older for fp in _fingerprints(airflow_home, two_runs["a"]).values())
