"""Spark's History Server on the project's event logs, as a background process on 127.0.0.1.

``dagspec history up`` (and ``dagspec airflow up``) starts it; its UI answers only requests carrying
a token signed with the project's key (``dagspec.spark_history``), so a browser reaches it through
dagspec's view in the Airflow UI, which checks the Airflow login and forwards with a token.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dagspec.job.connect_server import spark_env, spark_home
from dagspec.processes import Service, ServiceError, default_run_dir, json_or_none, start_all, wait_ready
from dagspec.spark_history import (
    DEFAULT_PORT,
    GROUP,
    JWS_FILTER,
    HistoryServer,
    events_dir,
    history_key,
    local_history,
)
from dagspec.storage import project_home

__all__ = ["DEFAULT_PORT", "HistoryStatus", "ensure_history", "history_down", "history_status", "history_up"]
HISTORY_CLASS = "org.apache.spark.deploy.history.HistoryServer"
UPDATE_INTERVAL = "3s"  # how often it reads the event logs again: a running stage's jobs show this late
HISTORY = Service(GROUP, "Spark History Server", "dagspec history down")


@dataclass
class HistoryStatus:
    """What ``history_status`` reports; printed by ``dagspec history status``."""

    url: str | None
    events: str | None
    running: bool
    applications: int | None = None

    def __str__(self) -> str:
        if self.url is None:
            return "Spark History Server: not running (dagspec history up)"
        state = "up" if self.running else "DEAD"
        apps = f", {self.applications} application(s)" if self.applications is not None else ""
        return (
            f"Spark History Server: {state} at {self.url}{apps}\n"
            f"  event logs: {self.events}\n"
            "  its UI needs a token: open it from a task's 'Spark UI' link in the Airflow UI"
        )


def write_properties(path: Path, events: str, key: str, port: int) -> list[str]:
    """The server's conf as a properties file (mode 0600: it holds the key; argv would show it to
    ``ps``); returns the server's command line."""
    lines = {
        "spark.history.fs.logDirectory": events,
        "spark.history.ui.port": str(port),
        "spark.history.fs.update.interval": UPDATE_INTERVAL,
        "spark.history.fs.cleaner.enabled": "true",  # event logs older than a week go
        "spark.ui.filters": JWS_FILTER,
        f"spark.{JWS_FILTER}.param.secretKey": key,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.writelines(f"{name}={value}\n" for name, value in lines.items())
    return [str(spark_home() / "bin" / "spark-class"), HISTORY_CLASS, "--properties-file", str(path)]


def _answers(server: HistoryServer) -> int | None:
    """How many applications the server lists (None: it does not answer yet)."""
    apps = json_or_none(f"{server.url}/api/v1/applications", headers=server.headers())
    return len(apps) if isinstance(apps, list) else None


def history_up(
    port: int = DEFAULT_PORT, *, home: Path | None = None, run_dir: Path | None = None, timeout: float = 90.0
) -> HistoryStatus:
    """Start the History Server on the project's event logs, on 127.0.0.1:``port``; wait until it answers."""
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    HISTORY.refuse_start(
        run_dir, [port], lambda port: f"port {port} on 127.0.0.1 is in use; stop what uses it or pick another: --port N"
    )
    argv = write_properties(run_dir / "history.properties", events_dir(home).as_uri(), history_key(home), port)
    url = f"http://127.0.0.1:{port}"
    info = {"url": url, "events": str(events_dir(home)), "home": str(home)}
    with HISTORY.starting(run_dir, info) as group:
        start_all(group, run_dir, [("spark-history", argv)], spark_env(run_dir))
        server = HistoryServer(url, history_key(home))
        wait_ready(
            group,
            run_dir,
            lambda: _answers(server) is not None,
            timeout,
            exited="the Spark History Server exited while starting",
            late=f"the Spark History Server did not answer on {url} in {timeout:.0f} s",
        )
    return history_status(home=home, run_dir=run_dir)


def ensure_history(home: Path, run_dir: Path, port: int = DEFAULT_PORT) -> str:
    """The History Server's status line: the running one, else one started now (``dagspec airflow up``);
    a port in use is said, not raised (the Spark UI links then say how to start one)."""
    if local_history(home, run_dir) is not None:
        return str(history_status(home=home, run_dir=run_dir))
    try:
        return str(history_up(port, home=home, run_dir=run_dir))
    except ServiceError as exc:
        return f"Spark History Server: not started: {str(exc).splitlines()[0]}"


def history_status(*, home: Path | None = None, run_dir: Path | None = None) -> HistoryStatus:
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    group = HISTORY.load(run_dir)
    if group is None:
        return HistoryStatus(None, None, False)
    server = local_history(home, run_dir)
    return HistoryStatus(
        str(group.info["url"]), str(group.info.get("events")), server is not None, _answers(server) if server else None
    )


def history_down(*, home: Path | None = None, run_dir: Path | None = None) -> str:
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    return HISTORY.stop(run_dir)


def main(argv: list[str]) -> None:
    """``python -m dagspec.local.history EVENTS_DIR KEY_FILE PORT``: the History Server in the
    foreground (the compose stack's service), on every interface of its container."""
    events, key_file, port = Path(argv[0]), Path(argv[1]), int(argv[2])
    properties = Path(os.environ.get("TMPDIR", "/tmp")) / "dagspec-history" / "history.properties"
    command = write_properties(properties, events.as_uri(), key_file.read_text().strip(), port)
    os.execv(command[0], command)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
