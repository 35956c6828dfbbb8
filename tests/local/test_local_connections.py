"""The connections a local run creates: own-driver stages go where the local server computes."""

from __future__ import annotations

import pytest

from dagspec.local.airflow_env import LOCAL_SUBMIT_CONN_ID, local_connections


@pytest.mark.parametrize("master", ["local[*]", "local[1]", "spark://127.0.0.1:7077"])
def test_own_driver_stages_are_submitted_to_the_local_servers_master(
    monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    monkeypatch.setenv("DAGSPEC_CONNECT_MASTER", master)
    monkeypatch.setenv("DAGSPEC_CONNECT_PORT", "15123")
    conns = local_connections("connect")
    assert conns[""]["conn_type"] == "spark_connect" and conns[""]["port"] == 15123
    assert conns[""]["extra"]["submit_conn_id"] == LOCAL_SUBMIT_CONN_ID
    assert conns[LOCAL_SUBMIT_CONN_ID] == {"conn_type": "spark", "host": master}


def test_spark_mode_submits_every_stage_to_local_star(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGSPEC_CONNECT_MASTER", raising=False)
    assert local_connections("spark") == {"": {"conn_type": "spark", "host": "local[*]"}}
    monkeypatch.setenv("DAGSPEC_CONNECT_MASTER", "local[1]")
    assert local_connections("connect")[LOCAL_SUBMIT_CONN_ID]["host"] == "local[1]"
