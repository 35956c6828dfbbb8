"""dagspec's view forwarding to the Spark History Server (``dagspec.airflow.ui.spark.forward``), against
a small HTTP server on 127.0.0.1 standing in for it: what is sent (a fresh token, the prefix, no
client header), and what comes back (status, type, redirects kept under the prefix)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dagspec.airflow.ui.spark import forward
from dagspec.spark_history import TOKEN_TTL_S, HistoryServer, bearer

KEY = base64.urlsafe_b64encode(b"k" * 32).decode().rstrip("=")


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_GET(self) -> None:
        self.seen.append({"path": self.path, "headers": dict(self.headers)})
        if self.path.startswith("/history/app-1"):
            self.send_response(302)
            self.send_header("Location", f"http://{self.headers['Host']}/history/app-1/jobs/")
            self.end_headers()
            return
        body = b'{"ok": true}' if self.path.startswith("/api/") else b"missing"
        self.send_response(200 if self.path.startswith("/api/") else 404)
        self.send_header("Content-Type", "application/json" if self.path.startswith("/api/") else "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[HistoryServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Recorder.seen.clear()
    yield HistoryServer(f"http://127.0.0.1:{httpd.server_address[1]}", KEY)
    httpd.shutdown()


def test_a_get_goes_with_a_fresh_token_and_the_prefix_and_comes_back_as_it_was(server: HistoryServer) -> None:
    answer = forward(server, "api/v1/applications", "status=running", "/dagspec/spark-history")
    assert (answer.status, answer.body, answer.headers["Content-Type"]) == (200, b'{"ok": true}', "application/json")
    (seen,) = _Recorder.seen
    assert seen["path"] == "/api/v1/applications?status=running"
    assert seen["headers"]["X-Forwarded-Context"] == "/dagspec/spark-history"
    header, payload, signature = seen["headers"]["Authorization"].removeprefix("Bearer ").split(".")
    expected = hmac.new(base64.urlsafe_b64decode(KEY + "="), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "=") == expected
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert 0 < claims["exp"] - time.time() <= TOKEN_TTL_S


def test_redirects_stay_under_the_prefix_and_errors_keep_their_status(server: HistoryServer) -> None:
    moved = forward(server, "history/app-1", "", "/dagspec/spark-history")
    assert (moved.status, moved.headers["Location"]) == (302, "/dagspec/spark-history/history/app-1/jobs/")
    assert forward(server, "history/other/jobs/", "", "/p").status == 404


def test_a_token_is_signed_by_its_key_only() -> None:
    now = 1_800_000_000.0
    assert bearer(KEY, now) == bearer(KEY, now)
    other = base64.urlsafe_b64encode(b"o" * 32).decode()
    assert bearer(KEY, now).rsplit(".", 1)[1] != bearer(other, now).rsplit(".", 1)[1]
