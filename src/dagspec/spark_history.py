"""Spark's History Server for dagspec's stages: where event logs go, the key its UI requires, how to reach it.

Spark writes what each application did (jobs, stages, SQL plans, tasks) as event logs; Spark's own
History Server replays them as the Spark UI. The local Connect server writes its event logs into
``<home>/.dagspec/spark-events`` (rolling files: a server runs for days); ``dagspec history up`` (and
``dagspec airflow up``) starts the History Server on them, bound to 127.0.0.1. A server's event log
stays "incomplete" while it runs, and the History Server reads it again every few seconds, so the
same page shows a running stage's jobs and a finished one's.

Every server needs credentials: the History Server's UI is behind Spark's own ``JWSFilter``
(``spark.ui.filters``), which answers 403 to a request without ``Authorization: Bearer <JWS>``
signed with the key in ``<home>/.dagspec/history.key`` (mode 0600). Browsers do not send such a
header: users reach it through dagspec's view in the Airflow UI (behind Airflow's login), which
forwards each request with a fresh, short-lived token (``dagspec.airflow.ui.spark``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dagspec.processes import ServiceGroup, default_run_dir, private_secret

GROUP = "history"
DEFAULT_PORT = 18080
JWS_FILTER = "org.apache.spark.ui.JWSFilter"
TOKEN_TTL_S = 60
HISTORY_URL_ENV = "DAGSPEC_SPARK_HISTORY_URL"  # set by `dagspec airflow up` for dagspec's view


def events_dir(home: Path) -> Path:
    """The project's event log folder (created, mode 0700: event logs hold query plans and conf)."""
    path = Path(home).resolve() / ".dagspec" / "spark-events"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def event_log_conf(home: Path) -> dict[str, str]:
    """The conf that makes a Spark application write its event log where the History Server reads."""
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events_dir(home).as_uri(),
        # a long-lived server's log is rolled, so the History Server replays a part, not one growing file
        "spark.eventLog.rolling.enabled": "true",
        "spark.eventLog.rolling.maxFileSize": "64m",
    }


def key_path(home: Path) -> Path:
    return Path(home).resolve() / ".dagspec" / "history.key"


def history_key(home: Path) -> str:
    """The key the History Server's ``JWSFilter`` checks tokens with (generated on first use, 0600)."""
    return private_secret(key_path(home), "Spark History Server key", "dagspec history down")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def bearer(key: str, now: float | None = None) -> str:
    """A JWS (HS256) the ``JWSFilter`` accepts for ``key``, valid for ``TOKEN_TTL_S`` seconds."""
    issued = int(time.time() if now is None else now)
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": "dagspec", "iat": issued, "exp": issued + TOKEN_TTL_S}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    secret = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


@dataclass(frozen=True)
class HistoryServer:
    """Where a running History Server answers, and the key its tokens are signed with."""

    url: str
    key: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {bearer(self.key)}"}


def local_history(home: Path, run_dir: Path | None = None) -> HistoryServer | None:
    """The History Server ``dagspec history up`` started for the project, if it runs (the one at
    ``$DAGSPEC_SPARK_HISTORY_URL`` in the processes of ``dagspec airflow up``)."""
    if os.environ.get(HISTORY_URL_ENV) and run_dir is None:
        return HistoryServer(os.environ[HISTORY_URL_ENV], history_key(home))
    group = ServiceGroup.load(run_dir or default_run_dir(home), GROUP)
    if group is None or not group.processes or not all(p.running for p in group.processes):
        return None
    return HistoryServer(str(group.info["url"]), history_key(home))
