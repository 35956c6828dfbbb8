"""The local Airflow environment of a project: AIRFLOW_HOME on SQLite, the Spark connection, ``.dagspec/env``.

Shared by ``dagspec run``/``init`` and the local Airflow services, so they all use one database
and one set of connections.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagspec.airflow.noise import python_warnings
from dagspec.errors import DagspecError
from dagspec.plan.modes import LOCAL_SERVER_EXTRA, is_local_server
from dagspec.spec.roots import STORAGE_ROOT_ENV, STORAGE_ROOTS_ENV, WATCH_ROOTS_ENV


def airflow_home(home: Path) -> Path:
    """$DAGSPEC_AIRFLOW_HOME, else ``<home>/.dagspec/airflow`` (SQLite, created on demand)."""
    return Path(os.environ.get("DAGSPEC_AIRFLOW_HOME") or home / ".dagspec" / "airflow").resolve()


def airflow_env(home: Path) -> dict[str, str]:
    """The environment every local Airflow command of dagspec runs with."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "AIRFLOW_HOME": str(airflow_home(home)),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "DAGSPEC_HOME": str(home),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        # third-party warnings kept out of the logs' head (dagspec.airflow.noise)
        "PYTHONWARNINGS": python_warnings(os.environ.get("PYTHONWARNINGS")),
    }
    passthrough_vars = ("DAGSPEC_PIPELINES", "DAGSPEC_PLUGINS", STORAGE_ROOT_ENV, STORAGE_ROOTS_ENV, WATCH_ROOTS_ENV)
    for passthrough in passthrough_vars:
        if os.environ.get(passthrough):
            env[passthrough] = os.environ[passthrough]
    return env


def airflow_argv(args: list[str]) -> list[str]:
    """The venv's ``airflow`` command with ``args``."""
    return [str(Path(sys.executable).parent / "airflow"), *args]


def short_airflow_argv(args: list[str]) -> list[str]:
    """Airflow's CLI with ``args`` for a command that ends (``dags test``), without the costs of a
    long-lived process (``dagspec.airflow.short_command`` says which, measured)."""
    return [sys.executable, "-m", "dagspec.airflow.short_command", *args]


def run_airflow(args: list[str], env: dict[str, str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run an ``airflow`` command in the local environment and wait for it."""
    return subprocess.run(airflow_argv(args), env={**os.environ, **env}, text=True, **kwargs)


def ensure_airflow_db(env: dict[str, str]) -> Path:
    """Create and migrate the SQLite metadata DB if it does not exist yet."""
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    if not db.exists():
        Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
        print(f"creating the local Airflow DB in {env['AIRFLOW_HOME']} ...", flush=True)
        done = run_airflow(["db", "migrate"], env, capture_output=True)
        if done.returncode != 0:
            raise DagspecError(f"airflow db migrate failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return db


def connection_env_var(conn_id: str) -> str:
    """The environment variable Airflow reads a connection from."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"


LOCAL_SUBMIT_CONN_ID = "dagspec_local_submit"
MODES = ("connect", "spark")


def local_mode() -> str:
    """The execution mode of the connections dagspec creates: $DAGSPEC_MODE, else ``connect``."""
    mode = os.environ.get("DAGSPEC_MODE", "connect")
    if mode not in MODES:
        raise DagspecError(f"DAGSPEC_MODE={mode!r}: expected one of {', '.join(MODES)}")
    return mode


def local_connections(mode: str) -> dict[str, dict[str, Any]]:
    """The default connection of ``mode`` (key ``""``) and the connections it refers to.

    In ``connect`` mode the stages that need a driver of their own are spark-submitted to the local
    server's master (``$DAGSPEC_CONNECT_MASTER``, ``local[*]`` by default), so that every stage of a
    run computes on the same cores or cluster.
    """
    if mode == "spark":
        return {"": {"conn_type": "spark", "host": "local[*]"}}
    from dagspec.job.connect_server import ServerSettings

    settings = ServerSettings.from_env()
    submit = {"conn_type": "spark", "host": settings.master}
    connect = {
        "conn_type": "spark_connect",
        "host": "sc://127.0.0.1",
        "port": settings.port,
        # stages that need a driver of their own are spark-submitted through this one
        "extra": {"submit_conn_id": LOCAL_SUBMIT_CONN_ID, LOCAL_SERVER_EXTRA: True},
    }
    return {"": connect, LOCAL_SUBMIT_CONN_ID: submit}


def ensure_spark_connection(env: dict[str, str], conn_id: str, mode: str | None = None) -> str:
    """Point ``conn_id`` at the local default of ``mode`` unless it exists (in the environment or the DB).

    Returns where it came from. Airflow 3 creates no connections, and without one the provider
    silently submits to YARN. The local default of ``connect`` mode is dagspec's local Spark
    Connect server, with ``local[*]`` spark-submit for the stages that need a driver of their own.
    """
    var = connection_env_var(conn_id)
    if os.environ.get(var):
        env[var] = os.environ[var]
        return "environment"
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(db) as con:
        if con.execute("SELECT 1 FROM connection WHERE conn_id = ?", (conn_id,)).fetchone():
            return "airflow db"
    mode = mode or local_mode()
    for other_id, connection in local_connections(mode).items():
        env[connection_env_var(other_id or conn_id)] = json.dumps(connection)
    return "local Spark Connect server" if mode == "connect" else "local[*] (default)"


def uses_local_server(env: dict[str, str], conn_id: str) -> bool:
    """Is ``conn_id`` (as set in ``env``) dagspec's local Connect server?"""
    text = env.get(connection_env_var(conn_id), "")
    if not text.startswith("{"):
        return False
    extra = json.loads(text).get("extra") or {}
    return isinstance(extra, dict) and is_local_server(extra)


def holds_secret(connection: str) -> bool:
    """Does a connection (URI or JSON, as in ``AIRFLOW_CONN_*``) carry a password or secret extras?"""
    from urllib.parse import parse_qsl, urlsplit

    text = connection.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return True  # unreadable: treat as secret
        extra = data.get("extra") if isinstance(data, dict) else None
        if isinstance(extra, str):
            try:
                extra = json.loads(extra)
            except ValueError:
                extra = {}
        keys = [str(k) for k in extra] if isinstance(extra, dict) else []
        return bool(isinstance(data, dict) and data.get("password")) or any(_SECRET_KEY.search(k) for k in keys)
    parts = urlsplit(text)
    query_keys = [k for k, _ in parse_qsl(parts.query)]
    return bool(parts.password) or any(_SECRET_KEY.search(k) for k in query_keys)


_SECRET_KEY = re.compile(r"pass|secret|token|key|credential|auth", re.IGNORECASE)


def write_env_file(home: Path, env: dict[str, str]) -> Path:
    """``env`` beside the Airflow home (``.dagspec/env``): `source` it to use plain ``airflow``.

    Written with mode 0600 (only its owner reads it), and never with a secret: a connection
    variable holding a password is left out with a comment saying where it comes from.
    """
    path = Path(env["AIRFLOW_HOME"]).parent / "env"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# generated by dagspec; `source .dagspec/env` then e.g. `airflow dags test ctr_demo`"]
    for key, value in sorted(env.items()):
        if key.startswith("AIRFLOW_CONN_") and holds_secret(value):
            lines.append(
                f"# {key} is not written here: it holds a password or a secret. Export it yourself in the "
                f"shell that runs airflow (as in the one that ran dagspec), or store the connection in "
                f"Airflow's DB: airflow connections add {key.removeprefix('AIRFLOW_CONN_').lower()} --conn-uri ..."
            )
            continue
        lines.append(f"export {key}={shlex.quote(value)}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)  # an older, world-readable file keeps its mode otherwise
        handle.write("\n".join(lines) + "\n")
    return path


def prepare_local_airflow(home: Path, conn_ids: Sequence[str] = ("spark_default",)) -> dict[str, str]:
    """AIRFLOW_HOME migrated, connections ensured, ``.dagspec/env`` written; returns the env."""
    env = airflow_env(home)
    ensure_airflow_db(env)
    for conn_id in conn_ids:
        ensure_spark_connection(env, conn_id)
    write_env_file(home, env)
    return env
