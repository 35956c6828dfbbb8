"""`dagspec airflow up --port`: the port reaches `airflow_up`, and a taken port is refused before anything starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dagspec.local import airflow_server, cli
from dagspec.processes import ServiceError


def test_port_option_reaches_airflow_up(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, object]] = []

    def fake_up(**options: object) -> str:
        calls.append(options)
        return "Airflow: up"

    monkeypatch.setattr(airflow_server, "airflow_up", fake_up)
    assert cli.main(["airflow", "up", "--port", "8095"]) == 0
    assert calls == [{"port": 8095}]
    assert cli.main(["airflow", "up"]) == 0
    assert calls[-1] == {"port": 8080}


def test_port_option_is_only_for_up(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, object]] = []

    def fake_status(**options: object) -> str:
        calls.append(options)
        return "Airflow: not running"

    monkeypatch.setattr(airflow_server, "airflow_status", fake_status)
    assert cli.main(["airflow", "status"]) == 0
    assert calls == [{}]


def test_taken_port_names_the_port_and_the_option(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServiceError, match=rf"^port {port} on 127\.0\.0\.1 is in use .*--port N$"):
            airflow_server.airflow_up(port=port, home=tmp_path, run_dir=tmp_path / "run")
    # refused before the Airflow home or any process record exists
    assert not (tmp_path / ".dagspec").exists()
    assert not (tmp_path / "run" / "airflow.json").exists()


def test_cli_prints_the_taken_port_as_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DAGSPEC_HOME", str(tmp_path))
    monkeypatch.delenv("DAGSPEC_RUN_DIR", raising=False)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["airflow", "up", "--port", str(port)]) == 1
    assert capsys.readouterr().err == (
        f"error: port {port} on 127.0.0.1 is in use (Airflow's UI and API would listen there); "
        "stop what uses it or pick another port: dagspec airflow up --port N\n"
    )
