"""The task's failure message: the stage's root cause located in the spec, first, from a real Connect client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from airflow.sdk.exceptions import AirflowException

from dagspec.airflow.compiler import compile_pipeline
from dagspec.job.connect_auth import server_token
from dagspec.job.connect_server import ensure_server
from dagspec.plan.failure import read_record
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import write_spec

pytestmark = pytest.mark.integration

SPEC = """
dag_id: broken_connect
spark: {conn_id: failing_connect}
stages:
  few:
    kind: sql
    params: {query: "SELECT id,, id FROM range(3)"}  # a typo validate lets through (sqlglot)
"""


def _failed_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conn: dict[str, Any]
) -> tuple[ResolvedStage, AirflowException]:
    """SPEC's stage run by its task's Connect client over connection ``conn``, which fails: what it raised."""
    monkeypatch.setenv("AIRFLOW_CONN_FAILING_CONNECT", json.dumps(conn))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "storage"))
    spec = load_spec(write_spec(tmp_path / "pipelines", SPEC, "b.yaml"), "pipelines/b.yaml")
    operator = compile_pipeline(spec, home=REPO, jobs_dir=REPO / "jobs").get_task("few")
    stage = resolve_pipeline(spec, default_context(spec), home=REPO)["few"]
    with pytest.raises(AirflowException) as raised:
        operator.run_connect_client(stage, force=False, extra={})  # type: ignore[attr-defined]
    return stage, raised.value


def test_a_failed_connect_client_raises_its_located_cause_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = urlsplit(ensure_server(REPO).replace("sc://", "http://"))
    # a connection of the user's own: the server's token in its password, on localhost (no TLS)
    conn = {
        "conn_type": "spark_connect",
        "host": "sc://localhost",
        "port": address.port,
        "password": server_token(REPO),
    }
    stage, raised = _failed_client(tmp_path, monkeypatch, conn)
    line = (
        "stage 'few' (pipelines/b.yaml:4:3, kind sql) failed: [PARSE_SYNTAX_ERROR] Syntax error at or near ',' "
        "(line 1, pos 10) in stages.few.params.query (pipelines/b.yaml:6:21)"
    )
    assert str(raised).splitlines() == [
        line,
        "(Connect client exit code 1; the full trace is in the lines above)",
    ]
    assert read_record(stage.stage_dir, stage.fingerprint) is not None
    record = json.loads(Path(stage.stage_dir, f"_failed-{stage.fingerprint}.json").read_text())
    assert record["line"] == line


@pytest.mark.parametrize(
    ("password", "sent"), [(None, "sent no token"), ("not-the-token", "sent a token that is not the server's")]
)
def test_a_connect_client_the_server_refuses_says_so_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password: str | None, sent: str
) -> None:
    """A Connect connection to the local server without its token, or with another one: the server
    refuses the client, and the task's failure says that, not "stopped answering", and no token."""
    port = urlsplit(ensure_server(REPO).replace("sc://", "http://")).port
    conn = {"conn_type": "spark_connect", "host": "sc://localhost", "port": port, "password": password}
    stage, raised = _failed_client(tmp_path, monkeypatch, conn)
    assert str(raised).splitlines()[0] == (
        f"stage 'few' (pipelines/b.yaml:4:3, kind sql) failed: the Spark Connect server sc://localhost:{port}/ refused "
        f"this client (UNAUTHENTICATED): it {sent}; the server requires its token, the password of the Spark Connect "
        "connection (dagspec's local server: .dagspec/connect.token; docs/security.md)"
    )
    record = Path(stage.stage_dir, f"_failed-{stage.fingerprint}.json").read_text()
    assert server_token(REPO) not in record + str(raised) and "not-the-token" not in record
