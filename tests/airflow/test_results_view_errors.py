"""The results view's error pages: each route raises where it finds the problem, and the app's one
handler shows it as an HTML page with its status (FastAPI's TestClient, no server, no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dagspec.airflow.ui import app as view
from dagspec.airflow.ui.files import MAX_INLINE_BYTES
from dagspec.airflow.ui.results import RunInfo, TaskInfo
from dagspec.plan.history import run_dir

DAG = "tiny"
SPEC = f"dag_id: {DAG}\nstages:\n  raw: {{kind: read, params: {{format: tsv, path: data/x.tsv, schema: criteo}}}}\n"


class OneRun:
    """Airflow's DB with one run of the DAG, whose one task succeeded."""

    def run(self, dag_id: str, run_id: str) -> RunInfo | None:
        return RunInfo(DAG, run_id, "success") if (dag_id, run_id) == (DAG, "manual__1") else None

    def tasks(self, dag_id: str, run_id: str) -> dict[str, TaskInfo]:
        return {"raw": TaskInfo("success", 1.0)}

    def recent(self, dag_id: str, limit: int) -> list[RunInfo]:
        return []


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / f"{DAG}.yaml").write_text(SPEC)
    monkeypatch.setenv("DAGSPEC_PIPELINES", str(tmp_path / "pipelines"))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "storage"))
    return tmp_path / "storage"


@pytest.fixture
def client(root: Path) -> TestClient:
    app = view.create_app()
    app.dependency_overrides[view.run_store] = OneRun
    app.dependency_overrides[view.can_read_runs] = lambda: None
    return TestClient(app)


def _error(client: TestClient, path: str, status: int, message: str) -> None:
    response = client.get(path)
    assert response.status_code == status, (path, response.text)
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert f'<p class="failed">{message}' in response.text, response.text


def test_each_route_answers_what_it_cannot_show_with_an_error_page(client: TestClient) -> None:
    for path in ("/dags/other/runs/manual__1", "/dags/other/compare", "/dags/other/files/raw/fp/x"):
        _error(client, path, 404, "no dagspec pipeline has dag_id &#x27;other&#x27;")
    _error(client, f"/dags/{DAG}/runs/manual__2", 404, f"no run &#x27;manual__2&#x27; of {DAG}")
    _error(client, f"/dags/{DAG}/runs/manual__1/stages/cooked", 404, "&#x27;cooked&#x27; is not a stage of run")
    _error(client, f"/dags/{DAG}/files/raw/fp/x.md", 404, "no file &#x27;raw/fp/x.md&#x27; in tiny&#x27;s")
    assert client.get(f"/dags/{DAG}/runs/manual__1").status_code == 200  # the run without records: its page


def test_unreadable_run_records_and_a_file_too_large_to_serve(client: TestClient, root: Path) -> None:
    records = Path(run_dir(str(root), DAG, "manual__1"))
    records.mkdir(parents=True)
    (records / "raw.json").write_text("{not json")
    _error(client, f"/dags/{DAG}/runs/manual__1", 409, "cannot read the run&#x27;s records:")
    _error(client, f"/dags/{DAG}/runs/manual__1/stages/raw", 409, "cannot read the run&#x27;s records:")
    checkpoint = root / DAG / "raw" / "fp1"
    (checkpoint / "report").mkdir(parents=True)
    (checkpoint / "report" / "big.bin").write_bytes(b"\0" * (MAX_INLINE_BYTES + 1))
    (checkpoint / "manifest.json").write_text(
        json.dumps({"fingerprint": "fp1", "outputs": {"report": {"type": "files"}}})
    )
    (checkpoint / "_SUCCESS").write_text("")
    _error(
        client, f"/dags/{DAG}/files/raw/fp1/report/big.bin", 413, "raw/fp1/report/big.bin is larger than the UI serves"
    )
