"""The token of the local Spark Connect server: every client must present it.

A Connect server runs whatever plan a client sends, and binding 127.0.0.1 still lets every local
user reach it. Spark's own pre-shared-key authentication closes that: the server, started with
``SPARK_CONNECT_AUTHENTICATE_TOKEN`` in its environment (not ``--conf``: ``ps`` shows argv), refuses
a call without ``Authorization: Bearer <token>`` (``PreSharedKeyAuthenticationInterceptor``).

The token is generated on first use into ``<home>/.dagspec/connect.token``, mode 0600: only the
user who owns the project reads it. The server's run file records a fingerprint of it, never the
token. A client puts it in its URL (``sc://localhost:PORT/;token=...``): pyspark sends a token
without TLS only to the host named ``localhost`` (gRPC local credentials, which also check that
the peer is on the loopback); to any other host, even ``127.0.0.1``, it insists on TLS, which the
server does not speak. Such a URL never reaches argv or a log: :func:`redact_url`
(``dagspec.plan.modes``) masks it wherever one is printed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

from dagspec.processes import private_secret

TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # read by the server (and by pyspark's client)


def token_path(home: Path) -> Path:
    """Where the project's token lives: beside its other run state, ``<home>/.dagspec/``."""
    return Path(home).resolve() / ".dagspec" / "connect.token"


def server_token(home: Path) -> str:
    """The project's token, generated (mode 0600) when there is none yet; refused when others can read it."""
    return private_secret(token_path(home), "Spark Connect token", "dagspec connect down")


def token_id(token: str) -> str:
    """A fingerprint of the token for run files and comparisons: never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def client_url(port: int, token: str) -> str:
    """The URL a client of the local server uses: ``localhost`` so that pyspark sends the token
    over gRPC's local credentials (loopback only) rather than asking the server for TLS."""
    return f"sc://localhost:{port}/;token={token}"


def with_token(url: str, token: str) -> str:
    """A connection's URL of the local server (``sc://127.0.0.1:PORT/;...``), as its clients use it: on
    ``localhost``, with the token (unless the connection carries one of its own)."""
    base, *params = url.split(";")
    if any(p.startswith("token=") for p in params):
        return url
    port = urlsplit(base).port or 15002  # Spark Connect's default
    return ";".join([client_url(port, token), *(p for p in params if p)])
