"""TLS and the token of the compose stack's Spark Connect server (docker-compose.yml, docs/deployment.md).

Spark 4.2's Connect server checks a pre-shared token (``SPARK_CONNECT_AUTHENTICATE_TOKEN``) but
speaks plaintext gRPC only, and pyspark sends a token without TLS to the host ``localhost`` alone:
to ``sc://spark-connect`` it insists on TLS. So the server listens on its container's loopback, and
this script terminates TLS in front of it, with a certificate from a CA made at the stack's first
start. Three verbs:

- ``secrets SECRETS_DIR CA_DIR [--name NAME ...] [--history DIR]``: once (the ``connect-secrets``
  service), when SECRETS_DIR holds no token yet: a random token, a CA, and the server's key and
  certificate for NAME (default ``spark-connect``), files 0600; the CA's certificate goes to CA_DIR
  for the clients (``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``). The CA's key is never written: no one can
  sign another certificate with it. With ``--history``, the Spark History Server's key goes to DIR
  (its own volume: the History Server never sees the Connect token).
- ``serve SECRETS_DIR [HOST:]LISTEN_PORT SERVER_PORT -- ARGV...``: the server's container. Runs ARGV (the
  spark-submit of the server) with the token in its environment (not argv: ``ps`` shows argv), and
  the TLS proxy LISTEN_PORT -> 127.0.0.1:SERVER_PORT; ends when either ends, so that Docker
  restarts the container whole.
- ``proxy SECRETS_DIR [HOST:]LISTEN_PORT SERVER_PORT``: the proxy alone (tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import secrets
import signal
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

CHUNK = 1 << 16


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(data)


def make_secrets(secrets_dir: Path, ca_dir: Path, names: list[str], history_dir: Path | None = None) -> str:
    """Generate the token, the CA and the server's certificate unless the token exists already; and
    the Spark History Server's key into ``history_dir`` unless it exists already."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    history = ""
    if history_dir is not None and not (history_dir / "history.key").is_file():  # its JWS key (dagspec.spark_history)
        _write(history_dir / "history.key", (secrets.token_urlsafe(32) + "\n").encode(), 0o600)
        history = "; generated the Spark History Server's key"
    if (secrets_dir / "token").is_file() and (ca_dir / "ca.pem").is_file():
        return f"connect-secrets: kept the token and certificates of an earlier start{history}"
    now = datetime.datetime.now(datetime.UTC)
    until = now + datetime.timedelta(days=3650)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dagspec compose Spark Connect CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    _write(secrets_dir / "server.key", key_pem, 0o600)
    _write(secrets_dir / "server.pem", cert.public_bytes(pem) + ca.public_bytes(pem), 0o600)
    _write(ca_dir / "ca.pem", ca.public_bytes(pem), 0o644)
    _write(secrets_dir / "token", (secrets.token_urlsafe(32) + "\n").encode(), 0o600)  # last: marks "done"
    return f"connect-secrets: generated the Connect token, a CA and the certificate of {', '.join(names)}{history}"


def _context(secrets_dir: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(secrets_dir / "server.pem", secrets_dir / "server.key")
    context.set_alpn_protocols(["h2"])  # gRPC clients require HTTP/2 to be negotiated
    return context


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def _address(listen: str) -> tuple[str, int]:
    """``PORT`` (every interface: the container's network) or ``HOST:PORT``."""
    host, _, port = listen.rpartition(":")
    return host or "0.0.0.0", int(port)


async def _proxy(secrets_dir: Path, listen: str, server_port: int) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", server_port)
        except OSError:
            client_writer.close()  # the server is not up (yet): the client retries
            return
        await asyncio.gather(_pump(client_reader, server_writer), _pump(server_reader, client_writer))

    host, port = _address(listen)
    server = await asyncio.start_server(handle, host, port, ssl=_context(secrets_dir))
    async with server:
        await server.serve_forever()


def serve(secrets_dir: Path, listen: str, server_port: int, argv: list[str]) -> int:
    """Run the server (ARGV) with the token in its environment, and the proxy; end when either ends."""
    token = (secrets_dir / "token").read_text().strip()
    child = subprocess.Popen(argv, env={**os.environ, "SPARK_CONNECT_AUTHENTICATE_TOKEN": token})
    loop = asyncio.new_event_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, child.terminate)
    proxy = loop.create_task(_proxy(secrets_dir, listen, server_port))
    ended = loop.run_in_executor(None, child.wait)
    waited: list[asyncio.Future[Any]] = [proxy, ended]
    done, _ = loop.run_until_complete(asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED))
    if proxy in done:  # the proxy failed: stop the server too, and let Docker restart the container
        print(f"connect-tls: the TLS proxy ended: {proxy.exception()!r}", file=sys.stderr, flush=True)
        child.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=30)
        child.kill()
        return 1
    return int(child.returncode)


def main(args: list[str]) -> int:
    if args[:1] == ["secrets"] and len(args) >= 3:
        names = [args[i + 1] for i, a in enumerate(args) if a == "--name" and i + 1 < len(args)] or ["spark-connect"]
        history = [Path(args[i + 1]) for i, a in enumerate(args) if a == "--history" and i + 1 < len(args)]
        print(make_secrets(Path(args[1]), Path(args[2]), names, history[0] if history else None), flush=True)
        return 0
    if args[:1] == ["serve"] and len(args) > 5 and args[4] == "--":
        return serve(Path(args[1]), args[2], int(args[3]), args[5:])
    if args[:1] == ["proxy"] and len(args) == 4:
        asyncio.run(_proxy(Path(args[1]), args[2], int(args[3])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
