"""The local Spark Connect server: one long-lived Spark driver that every Connect-mode stage uses.

Started once (``spark-submit --class ...SparkConnectServer``) and then reused: a stage costs a
Python client process instead of a JVM, and the server's Python workers (with TensorFlow or
XGBoost already imported) serve stage after stage. It binds 127.0.0.1 only: a Connect server
runs whatever plan a client sends, so it must not be reachable from the network, and it requires
the project's token from every client (``dagspec.job.connect_auth``), so that no other local user
can use it either.

Whoever needs it calls :func:`ensure_server` (``dagspec run``, ``dagspec airflow up``, and a
stage's job process when its connection says the server is dagspec's local one): it starts the
server when it is not answering, under a file lock so that concurrent callers start one. A
killed server is therefore restarted by the next stage attempt (an Airflow retry).

A server that answers is used only when this project started it, with this venv and this dagspec
code (``dagspec.job.server_identity``): another checkout's server is refused, and ours is
restarted when the code changed since it started, or when it does not require the project's
current token (one started before servers required one, or before its token file was replaced).
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from dagspec import jvm
from dagspec.job.connect_auth import TOKEN_ENV, server_token, token_id
from dagspec.job.server_identity import (
    ServerIdentity,
    group_listens,
    listener,
    read_identity,
    remove_identity,
    write_identity,
)
from dagspec.processes import ServiceError, ServiceGroup, default_run_dir, start_all, tail, wait_until
from dagspec.spark_history import event_log_conf

log = logging.getLogger("dagspec.connect")

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


def server_argv(settings: ServerSettings, home: Path) -> list[str]:
    """The spark-submit command line of the server. Its own web UI stays off (it would be a server
    without credentials); its event logs feed the History Server (``dagspec.spark_history``)."""
    events = [arg for key, value in event_log_conf(home).items() for arg in ("--conf", f"{key}={value}")]
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
        *events,
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


def server_env(home: Path, run_dir: Path, token: str) -> dict[str, str]:
    """The server's environment: a local Spark JVM's, with the token it requires (not in argv, which
    ``ps`` shows to every user)."""
    return {**spark_env(run_dir), "DAGSPEC_HOME": str(home), TOKEN_ENV: token}


def _recorded(run_dir: Path, port: int, ours: ServerIdentity) -> tuple[ServiceGroup, Path] | None:
    """The run file of the server of ``port``: in ``run_dir``, else in the run folder that the port's
    identity file names when this project started it (``dagspec airflow up`` with a run folder of its own)."""
    group = ServiceGroup.load(run_dir, GROUP)
    if group is not None and int(group.info.get("port", -1)) == port:
        return group, run_dir
    record = read_identity(port) or {}
    if record.get("project") == ours.project and isinstance(record.get("run_dir"), str):
        other = Path(record["run_dir"])
        group = ServiceGroup.load(other, GROUP)
        if group is not None and int(group.info.get("port", -1)) == port:
            return group, other
    return None


def our_server(run_dir: Path, port: int, ours: ServerIdentity) -> tuple[ServiceGroup, Path] | None:
    """The run file (and its folder) of the server answering on ``port`` when it is ours, else None.

    Ours: its run file names this project and venv (a run file in this project's run folder from
    before identities were recorded counts too; its code hash is unknown, so it is restarted), and
    its recorded process is alive and is what listens on the port.
    """
    found = _recorded(run_dir, port, ours)
    if found is None or not found[0].processes:
        return None
    recorded = ServerIdentity.from_info(found[0].info)
    if recorded is None and found[1] != run_dir:
        return None
    if recorded is not None and (recorded.project, recorded.venv) != (ours.project, ours.venv):
        return None
    proc = found[0].processes[0]
    return found if proc.running and group_listens(proc.pid, port) else None


def refusal(port: int, ours: ServerIdentity) -> str:
    """Why the server answering on ``port`` is not used, with whose it is as far as is known."""
    record = read_identity(port) or {}
    identity = ServerIdentity.from_info(record)
    pid = record.get("pid")
    if identity is not None and isinstance(pid, int) and group_listens(pid, port):
        whose = f"started by {identity.owner()}, pid {pid}"
    else:
        found = listener(port)
        whose = f"not started by dagspec: {found}" if found else "no dagspec identity recorded for the port"
    return (
        f"port {port} is served by a Spark Connect server that this project ({ours.project}) did not start "
        f"({whose}); stop it, or set DAGSPEC_CONNECT_PORT to another port"
    )


def ensure_server(home: Path, run_dir: Path | None = None, settings: ServerSettings | None = None) -> str:
    """The URL of the local server, started first when it does not answer.

    A server that answers is used only when it is ours (see :func:`our_server`): one started by
    another checkout or venv, or not by dagspec, is refused. Ours, started from other dagspec code
    than the current one, is restarted: its reused Python workers hold the old modules.
    """
    settings = settings or ServerSettings.from_env()
    run_dir = run_dir or default_run_dir(home)
    run_dir.mkdir(parents=True, exist_ok=True)
    ours = ServerIdentity.current(home)
    token = server_token(home)
    with (run_dir / f"{GROUP}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent stages or runs start one server, not several
        if answering(settings.port):
            found = our_server(run_dir, settings.port, ours)
            if found is None:
                raise ServiceError(refusal(settings.port, ours))
            group, folder = found
            why = _restart_reason(group, ours, token)
            if why is None:
                return settings.url
            # A stage running on it fails ("stopped answering") and commits nothing; its retry runs
            # it on the new server. Waiting for it instead would let new stages wait on old code.
            log.warning(
                "restarting the Spark Connect server at %s (pid %s): %s", settings.url, group.processes[0].pid, why
            )
            _stop(group, folder)
        else:
            stale = ServiceGroup.load(run_dir, GROUP)
            if stale is not None and _serves_another_port(stale, settings.port):
                # one run folder records one server: never stop another port's live one for this
                raise ServiceError(
                    f"this project's run folder {run_dir} records a Spark Connect server on port "
                    f"{stale.info['port']} (pid {stale.processes[0].pid}), still running; a run folder holds one "
                    f"server: use that port, stop it (DAGSPEC_CONNECT_PORT={stale.info['port']} dagspec connect "
                    f"down), or give this run another folder (DAGSPEC_RUN_DIR)"
                )
            if stale is not None:
                _stop(stale, run_dir)  # recorded but not answering: dead or hung, start afresh
        info = {"url": settings.url, "port": settings.port, "master": settings.master, **ours.as_info()}
        group = ServiceGroup(GROUP, [], {**info, "token_id": token_id(token)})
        start_all(group, run_dir, [("spark-connect", server_argv(settings, home))], server_env(home, run_dir, token))
        proc = group.processes[0]
        write_identity(settings.port, ours, proc.pid, proc.start_ticks, run_dir)
        if not wait_until(lambda: answering(settings.port) or not proc.running, START_TIMEOUT_S, interval=0.5):
            _stop(group, run_dir)
            raise ServiceError(f"the Spark Connect server did not answer within {START_TIMEOUT_S:.0f} s")
        if not proc.running:
            output = tail(proc.log, 20)
            _stop(group, run_dir)
            raise ServiceError(f"the Spark Connect server exited while starting:\n{output}")
        return settings.url


def _restart_reason(group: ServiceGroup, ours: ServerIdentity, token: str) -> str | None:
    """Why our answering server must be restarted before use, or None."""
    if group.info.get("code_hash") != ours.code_hash:
        return (
            f"dagspec's code changed since it started (code hash {group.info.get('code_hash', 'unrecorded')}, "
            f"now {ours.code_hash}), and its reused Python workers would run the old code"
        )
    if group.info.get("token_id") != token_id(token):
        return (
            "it does not require the project's current token (started before Spark Connect servers required "
            "one, or its token file was replaced since)"
        )
    return None


def _serves_another_port(group: ServiceGroup, port: int) -> bool:
    """Is the recorded server one on another port whose process still runs?"""
    recorded = group.info.get("port")
    return recorded is not None and int(recorded) != port and any(p.running for p in group.processes)


def _stop(group: ServiceGroup, run_dir: Path) -> list[str]:
    """Stop a recorded server; forget its run file and its identity file."""
    lines = group.stop(run_dir)
    if group.processes and "port" in group.info:
        remove_identity(int(group.info["port"]), group.processes[0].pid)
    return lines


def server_status(home: Path, run_dir: Path | None = None) -> str:
    """One line per fact: recorded process, whether it runs and answers; whose a server is when not ours."""
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, GROUP)
    port = int(group.info["port"]) if group is not None else ServerSettings.from_env().port
    if group is None:
        line = "Spark Connect server: not running"
    else:
        proc = group.processes[0]
        state = "running, not answering" if proc.running else "DEAD"
        line = f"Spark Connect server: {state}  {group.info['url']}  (pid {proc.pid}, log {proc.log})"
    if not answering(port):
        return line
    ours = ServerIdentity.current(home)
    found = our_server(run_dir, port, ours)
    if found is None:
        head = f"Spark Connect server: not started by this project at sc://127.0.0.1:{port}" if group is None else line
        return f"{head}\n  {refusal(port, ours)}"
    group, folder = found
    proc = group.processes[0]
    line = f"Spark Connect server: up  {group.info['url']}  (pid {proc.pid}, log {proc.log})"
    if folder != run_dir:
        line += f"\n  recorded in {folder}"
    why = _restart_reason(group, ours, server_token(home))
    if why is not None:
        line += f"\n  the next stage restarts it: {why}"
    return line


def stop_server(home: Path, run_dir: Path | None = None) -> str:
    """Stop the local server (and its Python workers)."""
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, GROUP)
    if group is None:
        return "Spark Connect server: not running"
    return "\n".join(["Spark Connect server stopped:", *(f"  {line}" for line in _stop(group, run_dir))])


def out_of_memory(run_dir: Path, window: int = 4 << 20) -> str | None:
    """The ``java.lang.OutOfMemoryError`` the local server's current instance logged, if any.

    The log is appended to across restarts: only its part since the last start counts (within the
    last ``window`` bytes: when no start is in them, all of them are the current instance's).
    """
    try:
        with (run_dir / "spark-connect.log").open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - window))
            text = log.read().decode(errors="replace")
    except OSError:
        return None
    start = text.rfind("SparkContext: Running Spark version")
    for line in text[max(start, 0) :].splitlines():
        at = line.find("java.lang.OutOfMemoryError")
        if at >= 0:
            return line[at:].strip()[:200]
    return None
