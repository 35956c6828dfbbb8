"""The Spark UI of a stage, from its task's "Spark UI" link: Spark's History Server, behind Airflow's login.

The History Server answers only requests with a token signed by its key (``dagspec.spark_history``):
this module finds the server (the Airflow connection ``spark_history_default``, as the compose stack
sets it, else the one ``dagspec history up`` started for the project), finds the application that
computed a stage (its manifest), and forwards the browser's GETs with a fresh token. Only what the
History Server serves is forwarded: no client header, no other method, no other host.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from dagspec import storage
from dagspec.checkpoint import Checkpoint
from dagspec.plan.history import read_run
from dagspec.plan.resolved import PARTITIONS_DIR
from dagspec.spark_history import HistoryServer, local_history

CONN_ID = "spark_history_default"
HISTORY_PATH = "/spark-history"  # under the app's prefix
MAX_BODY = 32 * 1024 * 1024
# Spark's UI runs its own scripts and styles; it may load and call nothing but itself
POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'self'; form-action 'self'; base-uri 'self'"
)


def history_server() -> HistoryServer | None:
    """The Airflow connection ``spark_history_default`` (host, port, the key as its password), else
    the project's local History Server, else None."""
    from airflow.models.connection import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = Connection.get_connection_from_secrets(CONN_ID)
    except AirflowNotFoundException:
        return local_history(storage.project_home())
    if not conn.host or not conn.password:
        return None
    return HistoryServer(f"http://{conn.host}:{conn.port or 18080}", conn.password)


@dataclass(frozen=True)
class StageApplication:
    """The Spark application that computed a stage, and the tags its jobs carry there."""

    app_id: str
    tags: tuple[str, ...] = ()

    def jobs_path(self) -> str:
        return f"/history/{quote(self.app_id)}/jobs/"


def stage_application(root: str, dag_id: str, run_id: str, stage: str) -> StageApplication | None:
    """From the stage's run record and its checkpoint's manifest (a partitioned stage: its newest
    computed partition's); None while the stage has recorded nothing (it runs, or never did)."""
    record = read_run(root, dag_id, run_id).get(stage)
    if record is None:
        return None
    manifests = [Checkpoint(record.stage_dir, record.fingerprint).manifest()]
    parts = record.metrics.get("partition_fingerprints")
    if isinstance(parts, dict):
        manifests = [
            Checkpoint(f"{record.stage_dir.rstrip('/')}/{PARTITIONS_DIR}/{key}", str(fp)).manifest()
            for key, fp in sorted(parts.items())
        ]
    for manifest in sorted((m for m in manifests if m), key=lambda m: str(m.get("finished")), reverse=True):
        spark = manifest.get("spark") or {}
        if spark.get("app_id"):
            return StageApplication(str(spark["app_id"]), tuple(spark.get("job_tags") or ()))
    return None


_NO_REDIRECTS = urllib.request.build_opener(
    type("_Keep", (urllib.request.HTTPRedirectHandler,), {"redirect_request": lambda *_a, **_k: None})
)


@dataclass(frozen=True)
class Forwarded:
    status: int
    body: bytes
    headers: dict[str, str]


def forward(server: HistoryServer, path: str, query: str, prefix: str) -> Forwarded:
    """GET ``path`` of the History Server with a token; its redirects point under ``prefix``."""
    url = f"{server.url}/{path.lstrip('/')}" + (f"?{query}" if query else "")
    request = urllib.request.Request(url, headers={**server.headers(), "X-Forwarded-Context": prefix})
    response: Any
    try:
        response = _NO_REDIRECTS.open(request, timeout=30)
    except urllib.error.HTTPError as exc:
        response = exc
    with response:
        body = response.read(MAX_BODY + 1)
        status = int(response.status if hasattr(response, "status") else response.code)
        headers = {"Content-Type": response.headers.get("Content-Type") or "application/octet-stream"}
        location = response.headers.get("Location")
    if len(body) > MAX_BODY:
        return Forwarded(502, b"the Spark History Server's answer is larger than the UI forwards", {})
    if location:
        location = location.removeprefix(server.url)
        if location.startswith("/") and not location.startswith(prefix):
            location = prefix + location
        headers["Location"] = location
    return Forwarded(status, body, headers)
