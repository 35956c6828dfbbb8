"""Which way a stage runs: as a client of a Spark Connect server, or by spark-submit with its own driver.

The Airflow connection chooses (a ``spark_connect`` connection selects Connect mode; a ``spark``
connection spark-submits every stage), and within Connect mode a stage keeps a driver of its own
when it cannot be a Connect client: its kind says so (RDDs, the JVM gateway, SparkXGB), or its
Spark conf holds a setting that only a new driver can take. A stage whose heavy work runs in its
own Python process (single-node training) is a Connect client when that process would run here
anyway: when the server shares this machine, or when a driver of its own would be started here too
(spark-submit's client deploy mode, the default and the only one standalone clusters offer Python),
where it would only add a JVM's start and executors that sit idle on the cluster. It keeps a driver
of its own, placed and sized by the cluster, when the submit connection's deploy mode is cluster.
``dagspec show`` and the Airflow task log print the same mode and reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dagspec.kinds.base import KindDef, StageParams
from dagspec.plan.fingerprint import RESOURCE_ONLY_CONF, conf_key_in
from dagspec.spec.params import is_true

CONNECT = "connect"
SUBMIT = "spark-submit"
CONNECT_CONN_TYPE = "spark_connect"
LOCAL_SERVER_EXTRA = "dagspec_local_server"  # Connect connection extra: dagspec's local server (restartable)
# A Connect client started before its stage is known reads the stage's arguments and environment
# as one JSON line on stdin (``dagspec.airflow.client_process``, ``dagspec.job.main``).
STAGE_ON_STDIN = "--stage-on-stdin"
# the token parameter of a Spark Connect URL (``sc://host:port/;token=...``), wherever it is printed
_URL_TOKEN = re.compile(r"(?i)(\btoken=)[^;&\s'\"]+")


def redact_url(text: str) -> str:
    """``text`` with every Spark Connect URL's token masked (``;token=***``): for logs and messages."""
    return _URL_TOKEN.sub(r"\1***", text)


# spark.sql.* settings a running server cannot change per session (they are read when it starts)
STATIC_SQL_CONF = (
    "spark.sql.extensions",
    "spark.sql.warehouse.dir",
    "spark.sql.catalogImplementation",
    "spark.sql.catalog.",
    "spark.sql.hive.",
    "spark.sql.queryExecutionListeners",
    "spark.sql.streaming.streamingQueryListeners",
)


@dataclass(frozen=True)
class ExecutionMode:
    """How one stage runs and why; ``line`` is what the log and ``dagspec show`` print."""

    mode: str
    reason: str

    @property
    def line(self) -> str:
        return f"mode: {self.mode} ({self.reason})"


def is_resource_conf(key: str) -> bool:
    """A setting that sizes or places the work without changing its result (see the fingerprint)."""
    return conf_key_in(key, RESOURCE_ONLY_CONF)


def is_session_conf(key: str) -> bool:
    """A setting a Connect client may set on its own session of a running server."""
    return key.startswith("spark.sql.") and not conf_key_in(key, STATIC_SQL_CONF)


def driver_only_conf(conf: dict[str, str]) -> list[str]:
    """Keys that change results and that only a driver of the stage's own can take."""
    return sorted(k for k in conf if not is_session_conf(k) and not is_resource_conf(k))


def execution_mode(
    kind: KindDef,
    conf: dict[str, str],
    connection_type: str,
    conn_id: str,
    *,
    params: StageParams | None = None,
    server_on_this_machine: bool = False,
    driver_here: bool = False,
) -> ExecutionMode:
    """The mode of a stage of ``kind`` (with ``params`` and ``conf``) under a connection of ``connection_type``.

    ``driver_here``: a driver of the stage's own would run on this machine too (see ``is_driver_here``).
    """
    if connection_type != CONNECT_CONN_TYPE:
        return ExecutionMode(SUBMIT, f"connection {conn_id!r} is of type {connection_type!r}")
    need, why = kind.driver_need(params)
    if need == "own":
        return ExecutionMode(SUBMIT, f"needs a driver of its own: {why or 'declared by its kind'}")
    if need == "process" and not (server_on_this_machine or driver_here):
        return ExecutionMode(
            SUBMIT, f"{why}: a driver of its own, placed by the cluster (deploy mode cluster), as the server is remote"
        )
    static = driver_only_conf(conf)
    if static:
        return ExecutionMode(SUBMIT, f"spark conf {', '.join(static)} is no session setting of a Connect server")
    client = f"a client of the Spark Connect server of connection {conn_id!r}"
    if need == "process":
        where = "on this machine" if server_on_this_machine else "here, where a driver of its own would run too"
        return ExecutionMode(CONNECT, f"{client}, {where}: {why} in the client process")
    return ExecutionMode(CONNECT, client)


def is_driver_here(submit_extra: Mapping[str, object] | None) -> bool:
    """Would spark-submit start a stage's driver on this machine? Yes unless the submit connection
    (its extra; None: no submit connection) asks for the cluster deploy mode."""
    return submit_extra is None or str(submit_extra.get("deploy-mode") or "client") != "cluster"


def is_local_server(extra: Mapping[str, object]) -> bool:
    """Does a Connect connection's extra mark dagspec's own local server (restartable)?"""
    return is_true(extra.get(LOCAL_SERVER_EXTRA, False))


def is_server_on_this_machine(host: str | None, extra: Mapping[str, object]) -> bool:
    """dagspec's local server, or a Connect URL on the loopback interface."""
    if is_local_server(extra):
        return True
    from urllib.parse import urlsplit

    url = host or ""
    try:
        name = urlsplit(url if "://" in url else f"sc://{url}").hostname
    except ValueError:  # no URL (a spark connection's local[*]): no server of its own
        return False
    return name in ("127.0.0.1", "localhost", "::1")
