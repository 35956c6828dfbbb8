"""`.dagspec/env`: readable by its owner only, and never holding a password."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from dagspec.local.airflow_env import holds_secret, write_env_file


def test_env_file_is_private_and_holds_no_password(tmp_path: Path) -> None:
    env_file = tmp_path / ".dagspec" / "env"
    env_file.parent.mkdir()
    env_file.write_text("old, world-readable\n")
    env_file.chmod(0o644)
    env = {
        "AIRFLOW_HOME": str(tmp_path / ".dagspec" / "airflow"),
        "AIRFLOW_CONN_SPARK_DEFAULT": "spark://admin:s3cr3t@spark-master:7077?deploy-mode=client",
        "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": "local[*]"}),
    }
    assert write_env_file(tmp_path, env) == env_file
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    text = env_file.read_text()
    assert "s3cr3t" not in text and "export AIRFLOW_CONN_SPARK_DEFAULT" not in text
    assert "# AIRFLOW_CONN_SPARK_DEFAULT is not written here: it holds a password or a secret." in text
    assert "airflow connections add spark_default --conn-uri ..." in text
    assert 'export AIRFLOW_CONN_SPARK_LOCAL=\'{"conn_type": "spark", "host": "local[*]"}\'' in text
    assert f"export AIRFLOW_HOME={tmp_path}/.dagspec/airflow" in text


@pytest.mark.parametrize(
    ("connection", "secret"),
    [
        ("spark://spark-master:7077", False),
        ("spark://user@spark-master:7077", False),
        ("spark://user:pw@spark-master:7077", True),
        ("spark://spark-master:7077?token=abc", True),
        ('{"conn_type": "spark", "host": "yarn"}', False),
        ('{"conn_type": "spark", "host": "yarn", "password": "pw"}', True),
        ('{"conn_type": "spark", "host": "k8s://x", "extra": {"api_token": "t"}}', True),
        ('{"conn_type": "spark", "host": "k8s://x", "extra": "{\\"client_secret\\": \\"t\\"}"}', True),
    ],
)
def test_secrets_are_recognized(connection: str, secret: bool) -> None:
    assert holds_secret(connection) is secret
