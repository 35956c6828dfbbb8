"""The local Spark Connect server: one long-lived Spark driver that every Connect-mode stage uses.

Started once (``spark-submit --class ...SparkConnectServer``) and then reused: a stage costs a
Python client process instead of a JVM, and the server's Python workers (with TensorFlow or
XGBoost already imported) serve stage after stage. It binds 127.0.0.1 only: a Connect server
runs whatever plan a client sends, so it must not be reachable from the network.

Whoever needs it calls :func:`ensure_server` (``dagspec run``, ``dagspec airflow up``, and a
stage's job process when its connection says the server is dagspec's local one): it starts the
server when it is not answering, under a file lock so that concurrent callers start one. A
killed server is therefore restarted by the next stage attempt (an Airflow retry).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from dagspec import jvm
from dagspec.processes import ServiceError, ServiceGroup, default_run_dir, start_all, tail, wait_until

GROUP = "connect"
DEFAULT_PORT = 15002  # Spark Connect's own default
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180.0


def spark_home() -> Path:
    """The pyspark package directory: it carries bin/spark-submit and the jars of a full Spark."""
    found = importlib.util.find_spec("pyspark")
    if found is None or found.origin is None:
        raise ServiceError("pyspark is not installed in this environment")
    return Path(found.origin).parent


@dataclass(frozen=True)
class ServerSettings:
    """How the local server is started; each from an environment variable, with a default."""

    port: int
    master: str
    driver_memory: str

    @classmethod
    def from_env(cls) -> ServerSettings:
        return cls(
            port=int(os.environ.get("DAGSPEC_CONNECT_PORT", DEFAULT_PORT)),
            master=os.environ.get("DAGSPEC_CONNECT_MASTER", "local[*]"),
            driver_memory=os.environ.get("DAGSPEC_CONNECT_DRIVER_MEMORY", "4g"),
        )

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def answering(port: int, timeout: float = 1.0) -> bool:
    """Does something accept connections on 127.0.0.1:``port``?"""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def server_argv(settings: ServerSettings) -> list[str]:
    """The spark-submit command line of the server."""
    return [
        str(spark_home() / "bin" / "spark-submit"),
        "--class", SERVER_CLASS,
        "--master", settings.master,
        "--driver-memory", settings.driver_memory,
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={settings.port}",
        "--conf", "spark.ui.enabled=false",
        # Python workers stay alive between tasks, and so between stages: TensorFlow or XGBoost
        # is imported once per worker (Spark's default, stated because the speed depends on it)
        "--conf", "spark.python.worker.reuse=true",
        "--name", "dagspec-connect",
        "spark-internal",
    ]  # fmt: skip


def spark_env(run_dir: Path) -> dict[str, str]:
    """Environment of a local Spark JVM (a server, a master or a worker) and the executors it starts."""
    python = sys.executable
    return {
        **os.environ,
        **jvm.jvm_env(),  # the class archive, when built: every JVM of a server or cluster starts faster
        "SPARK_HOME": str(spark_home()),
        # executors start Python workers with this; the system python has no pandas/pyarrow
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", python),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", python),
        # else Spark binds and advertises the machine's external interface
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(run_dir),
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def server_env(home: Path, run_dir: Path) -> dict[str, str]:
    return {**spark_env(run_dir), "DAGSPEC_HOME": str(home)}


def server_status(home: Path, run_dir: Path | None = None) -> str:
    """One line per fact: recorded process, whether it runs and answers."""
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, GROUP)
    if group is None:
        return "Spark Connect server: not running"
    proc = group.processes[0]
    port = int(group.info["port"])
    state = "up" if proc.running and answering(port) else "running, not answering" if proc.running else "DEAD"
    return f"Spark Connect server: {state}  {group.info['url']}  (pid {proc.pid}, log {proc.log})"


def ensure_server(home: Path, run_dir: Path | None = None, settings: ServerSettings | None = None) -> str:
    """The URL of the local server, started first when it does not answer."""
    settings = settings or ServerSettings.from_env()
    run_dir = run_dir or default_run_dir(home)
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / f"{GROUP}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent stages or runs start one server, not several
        if answering(settings.port):
            # ours, or one started with another run folder (`dagspec airflow up` in a test, a
            # developer's own): a server answers there, and that is what a stage needs
            return settings.url
        group = ServiceGroup.load(run_dir, GROUP)
        if group is not None:
            group.stop(run_dir)  # recorded but not answering: dead or hung, start afresh
        group = ServiceGroup(GROUP, [], {"url": settings.url, "port": settings.port, "master": settings.master})
        start_all(group, run_dir, [("spark-connect", server_argv(settings))], server_env(home, run_dir))
        proc = group.processes[0]
        if not wait_until(lambda: answering(settings.port) or not proc.running, START_TIMEOUT_S, interval=0.5):
            group.stop(run_dir)
            raise ServiceError(f"the Spark Connect server did not answer within {START_TIMEOUT_S:.0f} s")
        if not proc.running:
            log = tail(proc.log, 20)
            group.stop(run_dir)
            raise ServiceError(f"the Spark Connect server exited while starting:\n{log}")
        return settings.url


def stop_server(home: Path, run_dir: Path | None = None) -> str:
    """Stop the local server (and its Python workers)."""
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, GROUP)
    if group is None:
        return "Spark Connect server: not running"
    return "\n".join(["Spark Connect server stopped:", *(f"  {line}" for line in group.stop(run_dir))])
