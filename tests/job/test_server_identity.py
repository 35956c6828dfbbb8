"""A Spark Connect server that this project did not start is refused, whose it is is said, and our
own server started from other dagspec code, or without the project's current token, is restarted.

Real processes on free ports (never 15002, the tests' shared server) and run folders under
tmp_path. The restart test starts a small TCP listener in place of the Spark Connect JVM: what is
tested is which server is used, stopped and recorded, not Spark's start (test_connect_server.py
starts the real one).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagspec.job import connect_server
from dagspec.job.connect_auth import server_token, token_id
from dagspec.job.connect_server import GROUP, ServerSettings, ensure_server, server_status, stop_server
from dagspec.job.server_identity import (
    ServerIdentity,
    code_hash,
    identity_path,
    read_identity,
    remove_identity,
    write_identity,
)
from dagspec.processes import ServiceGroup, free_port, start_all, wait_until
from tests.conftest import REPO
from tests.helpers import DAGSPEC

LISTENER = "import socket, sys, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
LISTENER += "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(600)"


def listener_argv(port: int) -> list[str]:
    return [sys.executable, "-c", LISTENER, str(port)]


@pytest.fixture
def settings() -> Iterator[ServerSettings]:
    port = free_port()
    yield ServerSettings(port=port, master="local[1]", driver_memory="1g")
    identity_path(port).unlink(missing_ok=True)


def start_listener(settings: ServerSettings, run_dir: Path, info: dict[str, object]) -> ServiceGroup:
    """A recorded group whose one process listens on the port, as a started server's does."""
    group = ServiceGroup(GROUP, [], {"url": settings.url, "port": settings.port, **info})
    start_all(group, run_dir, [("spark-connect", listener_argv(settings.port))], dict(os.environ))
    assert wait_until(lambda: connect_server.answering(settings.port), 30)
    return group


def test_a_port_served_by_something_else_is_refused_with_whose_it_is(tmp_path: Path, settings) -> None:
    run_dir = tmp_path / "run"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", settings.port))
        sock.listen()
        message = (
            rf"port {settings.port} is served by a Spark Connect server that this project \({REPO}\) did not start "
            rf"\(not started by dagspec: pid {os.getpid()}: [^\n]*\); stop it, or set DAGSPEC_CONNECT_PORT to "
            "another port"
        )
        with pytest.raises(connect_server.ServiceError, match=message):
            ensure_server(REPO, run_dir, settings)
    assert ServiceGroup.load(run_dir, GROUP) is None and read_identity(settings.port) is None


def test_another_checkouts_server_is_refused_and_status_says_whose_it_is(tmp_path: Path, settings) -> None:
    other = ServerIdentity("/other/checkout", "/other/.venv", "/other/.venv/bin/python", "0" * 16)
    group = start_listener(settings, tmp_path / "other-run", other.as_info())
    try:
        proc = group.processes[0]
        write_identity(settings.port, other, proc.pid, proc.start_ticks, tmp_path / "other-run")
        refusal = (
            f"port {settings.port} is served by a Spark Connect server that this project ({REPO}) did not start "
            f"(started by /other/checkout with /other/.venv, pid {proc.pid}); stop it, or set DAGSPEC_CONNECT_PORT "
            "to another port"
        )
        with pytest.raises(connect_server.ServiceError, match=re.escape(refusal)):
            ensure_server(REPO, tmp_path / "run", settings)
        assert proc.running, "a server that is not ours is never stopped"
        env = {**os.environ, "DAGSPEC_HOME": str(REPO), "DAGSPEC_CONNECT_PORT": str(settings.port)}
        env["DAGSPEC_RUN_DIR"] = str(tmp_path / "run")
        status = subprocess.run([DAGSPEC, "connect", "status"], capture_output=True, text=True, check=True, env=env)
        assert status.stdout.splitlines() == [
            f"Spark Connect server: not started by this project at sc://127.0.0.1:{settings.port}",
            f"  {refusal}",
        ]
    finally:
        group.stop(tmp_path / "other-run")
        remove_identity(settings.port, group.processes[0].pid)


NO_TOKEN = "it does not require the project's current token (started before Spark Connect servers required one, "
CODE = "dagspec's code changed since it started (code hash {was}, now "


@pytest.mark.parametrize(
    ("recorded_hash", "token"),
    [("0" * 16, True), (None, False), ("current", False)],
    ids=["a kind edited since", "no identity recorded", "started without a token"],
)
def test_our_server_started_from_other_code_or_without_the_token_is_restarted_then_reused(
    tmp_path: Path, settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, recorded_hash, token
) -> None:
    run_dir = tmp_path / "run"
    ours = ServerIdentity.current(REPO)
    with_token = {"token_id": token_id(server_token(REPO))} if token else {}
    if recorded_hash is None:  # a run file in this project's run folder from before identities were recorded
        old = start_listener(settings, run_dir, {}).processes[0]
    else:
        stale = ServerIdentity(ours.project, ours.venv, ours.python, ours.code_hash)
        if recorded_hash != "current":
            stale = ServerIdentity(ours.project, ours.venv, ours.python, recorded_hash)
        old = start_listener(settings, run_dir, {**stale.as_info(), **with_token}).processes[0]
        write_identity(settings.port, stale, old.pid, old.start_ticks, run_dir)
    monkeypatch.setattr(connect_server, "server_argv", lambda s, home: listener_argv(s.port))
    why = NO_TOKEN if recorded_hash == "current" else CODE.format(was=recorded_hash or "unrecorded")
    try:
        assert f"  the next stage restarts it: {why}" in server_status(REPO, run_dir)
        with caplog.at_level(logging.WARNING, logger="dagspec.connect"):
            assert ensure_server(REPO, run_dir, settings) == settings.url
        assert f"(pid {old.pid}): {why}" in caplog.text
        assert not old.running and not old.group_alive()
        group = ServiceGroup.load(run_dir, GROUP)
        assert group is not None and group.info["code_hash"] == code_hash(REPO)
        assert group.info["token_id"] == token_id(server_token(REPO))
        new = group.processes[0]
        assert new.running and read_identity(settings.port) == {
            **ours.as_info(),
            "pid": new.pid,
            "start_ticks": new.start_ticks,
            "run_dir": str(run_dir),
        }
        caplog.clear()
        assert ensure_server(REPO, run_dir, settings) == settings.url  # ours, current code: reused
        reused = ServiceGroup.load(run_dir, GROUP)
        assert reused is not None and reused.processes[0].pid == new.pid and not caplog.text
        up = f"Spark Connect server: up  {settings.url}  (pid {new.pid}, log {new.log})"
        assert server_status(REPO, run_dir) == up
    finally:
        print(stop_server(REPO, run_dir))
    assert read_identity(settings.port) is None


def test_a_server_of_another_port_recorded_in_the_run_folder_is_never_stopped_for_this_one(
    tmp_path: Path, settings
) -> None:
    """Two runs of one checkout on two ports: the second one's start must not kill the first one's server."""
    other = ServerSettings(port=free_port(), master="local[1]", driver_memory="1g")
    group = start_listener(other, tmp_path, ServerIdentity.current(REPO).as_info())
    try:
        with pytest.raises(connect_server.ServiceError) as refused:
            ensure_server(REPO, tmp_path, settings)
        assert (
            f"records a Spark Connect server on port {other.port} (pid {group.processes[0].pid}), still running"
            in str(refused.value)
        )
        assert group.processes[0].running and connect_server.answering(other.port)
    finally:
        group.stop(tmp_path)
        identity_path(other.port).unlink(missing_ok=True)
