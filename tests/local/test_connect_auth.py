"""The local Spark Connect server requires the project's token: a client without it, or with another
one, is refused by the server; the token is in a file only its owner reads, and in no argv, run file,
identity file or printed URL."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dagspec.job.connect_auth import server_token, token_id, token_path, with_token
from dagspec.job.connect_server import ServerSettings, answering, ensure_server, our_server
from dagspec.job.server_identity import ServerIdentity, identity_path
from dagspec.plan.modes import redact_url
from dagspec.processes import ServiceError, default_run_dir, free_port, wait_until
from tests.conftest import REPO
from tests.helpers import DAGSPEC

pytestmark = pytest.mark.integration

# a pyspark Connect client, as any local user could start one: one query, one retry at most
CLIENT = """
import sys
from pyspark.sql import SparkSession
from pyspark.sql.connect.client.retries import DefaultPolicy
try:
    spark = SparkSession.builder.remote(sys.argv[1]).create()
    spark.client.set_retry_policies([DefaultPolicy(max_retries=1, max_backoff=200)])
    print("rows", spark.range(3).count())
except Exception as exc:
    print("refused", type(exc).__name__, exc)
"""


def _client(url: str, **extra_env: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"} | extra_env
    done = subprocess.run([sys.executable, "-c", CLIENT, url], capture_output=True, text=True, env=env, timeout=120)
    return done.stdout.strip() or done.stderr[-2000:]


def test_a_client_without_the_token_or_with_another_is_refused_and_with_it_is_served() -> None:
    url = ensure_server(REPO)  # sc://127.0.0.1:PORT, as printed
    port = ServerSettings.from_env().port
    assert "token" not in url
    without = _client(url)
    assert without.startswith("refused SparkConnectGrpcException")
    assert "UNAUTHENTICATED" in without and "No authentication token provided" in without
    wrong = _client(f"sc://localhost:{port}/;token=not-the-token")
    assert "UNAUTHENTICATED" in wrong and "Invalid authentication token" in wrong
    assert _client(with_token(url, server_token(REPO))) == "rows 3"


def test_the_token_is_the_owners_alone_and_in_no_argv_record_or_printed_url() -> None:
    ensure_server(REPO)
    token = server_token(REPO)
    mode = token_path(REPO).stat().st_mode
    assert stat.S_IMODE(mode) == 0o600 and len(token) >= 40
    port = ServerSettings.from_env().port
    found = our_server(default_run_dir(REPO), port, ServerIdentity.current(REPO))
    assert found is not None
    group, folder = found
    argv = Path(f"/proc/{group.processes[0].pid}/cmdline").read_bytes().decode()
    assert token not in argv  # `ps` shows argv to every user; the token is in the server's environment
    assert token not in (folder / "connect.json").read_text() and token not in identity_path(port).read_text()
    assert group.info["token_id"] == token_id(token)
    status = subprocess.run([DAGSPEC, "connect", "status"], capture_output=True, text=True, check=True, cwd=REPO)
    assert status.stdout.startswith("Spark Connect server: up") and token not in status.stdout
    assert redact_url(f"failed: {with_token(f'sc://127.0.0.1:{port}', token)}") == (
        f"failed: sc://localhost:{port}/;token=***"
    )
    assert json.dumps({"url": redact_url(with_token("sc://x:1/;user_id=u", token))}).count("***") == 1


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = token_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("leaked\n")
    path.chmod(0o644)
    with pytest.raises(ServiceError, match=r"readable by others \(mode 0644\)"):
        server_token(tmp_path)
    path.unlink()
    assert len(server_token(tmp_path)) >= 40 and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_compose_servers_tls_proxy_carries_the_token_to_clients_that_trust_the_stacks_ca(tmp_path: Path) -> None:
    """deploy/connect_tls.py as docker-compose.yml runs it, in front of the local server: pyspark sends
    a token to a host other than localhost over TLS only, and verifies the certificate with the CA
    that ``secrets`` made (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, as the Airflow containers set it)."""
    ensure_server(REPO)
    server_dir, ca_dir = tmp_path / "secrets", tmp_path / "ca"
    server_dir.mkdir(mode=0o700)
    ca_dir.mkdir()
    tls = [sys.executable, str(REPO / "deploy" / "connect_tls.py")]
    made = subprocess.run(
        [*tls, "secrets", str(server_dir), str(ca_dir), "--name", "127.0.0.1"], capture_output=True, text=True
    )
    assert made.returncode == 0 and "generated the Connect token, a CA and the certificate of 127.0.0.1" in made.stdout
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in server_dir.iterdir()}
    assert modes == {"token": 0o600, "server.key": 0o600, "server.pem": 0o600}
    assert "PRIVATE KEY" not in (ca_dir / "ca.pem").read_text()  # the CA's key is never written
    again = subprocess.run([*tls, "secrets", str(server_dir), str(ca_dir)], capture_output=True, text=True)
    assert "kept the token and certificates of an earlier start" in again.stdout
    proxy_port = free_port()
    proxy = subprocess.Popen(
        [*tls, "proxy", str(server_dir), f"127.0.0.1:{proxy_port}", str(ServerSettings.from_env().port)]
    )
    try:
        assert wait_until(lambda: answering(proxy_port), 30)
        url = f"sc://127.0.0.1:{proxy_port}/;token={server_token(REPO)}"
        assert _client(url, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=str(ca_dir / "ca.pem")) == "rows 3"
        untrusted = _client(url)  # the system's CAs do not know the stack's
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted and "rows" not in untrusted
        wrong = _client(
            f"sc://127.0.0.1:{proxy_port}/;token=nope", GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=str(ca_dir / "ca.pem")
        )
        assert "Invalid authentication token" in wrong
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)


CHILD = """
import os, sys
print("token in env:", os.environ.get("SPARK_CONNECT_AUTHENTICATE_TOKEN") == open(sys.argv[1]).read().strip(), flush=True)
sys.exit(3)
"""


def test_serve_gives_the_server_its_token_in_the_environment_and_ends_with_it(tmp_path: Path) -> None:
    """The spark-connect container's command: the server's exit ends it (Docker restarts it whole)."""
    (tmp_path / "ca").mkdir()
    tls = [sys.executable, str(REPO / "deploy" / "connect_tls.py")]
    subprocess.run([*tls, "secrets", str(tmp_path), str(tmp_path / "ca")], check=True, capture_output=True)
    argv = [*tls, "serve", str(tmp_path), f"127.0.0.1:{free_port()}", "1", "--"]
    done = subprocess.run([*argv, sys.executable, "-c", CHILD, str(tmp_path / "token")], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (3, "token in env: True\n"), done.stderr
