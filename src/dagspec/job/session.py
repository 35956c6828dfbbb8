"""Creating SparkSessions: the only module that does.

Except ``jvm_warmup``: plain pyspark, as the image runs it before dagspec is installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dagspec.job.server_identity import ServerIdentity, group_listens, read_identity

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The server URL of each Connect session created here (by id: one or two sessions per process, more
# for a partitioned stage's partitions run side by side), and the session settings it was given
_REMOTES: dict[int, str] = {}
_CONFS: dict[int, dict[str, str]] = {}
# Every stage's session, as Spark's docs advise on HotSpot: whole-stage code generation writes one
# method per stage, and HotSpot leaves methods of more than 8,000 bytes of bytecode to its
# interpreter; above that Spark generates code per operator instead, in methods the JIT compiles.
# A wide projection (ctr_features as_is: 26 hex columns checked) took 35 s of JVM CPU at 10^6 rows
# with Spark's default (65535) and 16-19 s with this (bench/RESULTS.md, "Every data kind"). Results
# do not change; a stage's own conf may set another value.
CODEGEN_CONF = {"spark.sql.codegen.hugeMethodLimit": "8000"}


def create_session(
    app_name: str, *, master: str | None = None, remote: str | None = None, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A session: a Spark Connect client of ``remote`` when given, else a classic driver.

    Inside spark-submit the master and conf come from its command line. A Connect client gets
    ``conf`` set on its own session (only session settings: see ``dagspec.plan.modes``).
    """
    from pyspark.sql import SparkSession

    if remote is not None:
        from pyspark.sql.connect.client.retries import DefaultPolicy

        session = SparkSession.builder.remote(remote).getOrCreate()
        # pyspark's default retries an unreachable server for about ten minutes; a stage fails in
        # ~10 s instead, and Airflow's retry (which restarts dagspec's local server) takes over
        session.client.set_retry_policies([DefaultPolicy(max_retries=6, max_backoff=4000)])
        settings = {**CODEGEN_CONF, **(conf or {})}
        for key, value in settings.items():
            session.conf.set(key, value)
        _REMOTES[id(session)] = remote
        _CONFS[id(session)] = settings
        return session
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    session = builder.getOrCreate()
    for key, value in CODEGEN_CONF.items():
        if key not in (conf or {}) and session.conf.get(key, None) in (None, "65535"):
            session.conf.set(key, value)
    return session


def sibling_session(spark: SparkSession) -> SparkSession:
    """Another session of the same Spark (its own temporary views and session settings, the same
    executors): for work run side by side in threads, such as a stage's partitions, where one
    query's views must not replace another's. A Connect client gets a new server session with the
    same settings; a classic driver a new session of its SparkContext."""
    remote = _REMOTES.get(id(spark))
    if remote is None:
        return spark.newSession()
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    session = SparkSession.builder.remote(remote).create()
    session.client.set_retry_policies([DefaultPolicy(max_retries=6, max_backoff=4000)])
    for key, value in _CONFS.get(id(spark), {}).items():
        session.conf.set(key, value)
    _REMOTES[id(session)] = remote
    _CONFS[id(session)] = dict(_CONFS.get(id(spark), {}))
    return session


def release_sibling(session: SparkSession) -> None:
    """End a session ``sibling_session`` made: a Connect server session is released; a classic one
    shares its SparkContext with the stage's own session and is left to it."""
    if _REMOTES.pop(id(session), None) is not None:
        _CONFS.pop(id(session), None)
        session.stop()


def server_record(spark: SparkSession) -> dict[str, Any] | None:
    """Which Spark Connect server computes in ``spark`` (None for a driver of its own), for the manifest.

    Its URL without parameters (a token never lands in a manifest), what the server reports
    (version, application id and name), and for dagspec's local server the identity it was started
    with (project, venv, dagspec code hash, pid: ``dagspec.job.server_identity``).
    """
    remote = _REMOTES.get(id(spark))
    if remote is None:
        return None
    parts = urlsplit(remote.split(";")[0])
    port = parts.port or 15002  # Spark Connect's default
    record: dict[str, Any] = {"url": f"{parts.scheme}://{parts.hostname}:{port}", "spark_version": spark.version}
    for key in ("spark.app.id", "spark.app.name"):
        with contextlib.suppress(Exception):  # a courtesy of the manifest: a server refusing a setting leaves it out
            record[key.removeprefix("spark.").replace(".", "_")] = spark.conf.get(key)
    if parts.hostname in ("127.0.0.1", "localhost", "::1"):
        found = read_identity(port) or {}
        identity = ServerIdentity.from_info(found)
        pid = found.get("pid")
        if identity is not None and isinstance(pid, int) and group_listens(pid, port):
            record["dagspec_server"] = {**identity.as_info(), "pid": pid}
    return record
