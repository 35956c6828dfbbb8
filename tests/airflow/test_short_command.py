"""``python -m dagspec.airflow.short_command``: Airflow's own CLI, with Airflow's output and exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import airflow

SHORT = [sys.executable, "-m", "dagspec.airflow.short_command"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}


def test_a_command_prints_what_airflow_prints(tmp_path: Path) -> None:
    done = subprocess.run([*SHORT, "version"], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == airflow.__version__


def test_a_failing_command_exits_with_airflows_status(tmp_path: Path) -> None:
    done = subprocess.run([*SHORT, "dags", "nonsense"], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2  # argparse's usage error, as `airflow dags nonsense` gives
    assert "invalid choice" in done.stderr


OPENAPI_OF_THE_CLIENTS_VERSION = """
import json, sys
import httpx
from dagspec.airflow.short_command import newest_versions_only
from airflow.api_fastapi.execution_api import versions
from airflow.api_fastapi.execution_api.app import InProcessExecutionAPI
from airflow.sdk.api.datamodels._generated import API_VERSION

cut = newest_versions_only() if sys.argv[1] == "cut" else False
client = httpx.Client(transport=InProcessExecutionAPI().transport, base_url="http://in-process.invalid./")
served = client.get(f"/openapi.json?version={API_VERSION}", headers={"airflow-api-version": API_VERSION})
health = client.get("/health", headers={"airflow-api-version": API_VERSION})
print(json.dumps({"cut": cut, "versions": [v.value for v in versions.bundle.versions], "client": API_VERSION,
                  "openapi": served.json(), "health": health.status_code}))
"""


def test_dags_test_serves_its_clients_api_version_as_airflow_does_from_fewer_versions(tmp_path: Path) -> None:
    """The execution API ``dags test`` builds with the newest versions only: the OpenAPI document of
    the version its client sends is Airflow's own, to the byte; the older versions are not built."""
    import json

    served = {}
    for variant in ("full", "cut"):
        done = subprocess.run(
            [sys.executable, "-c", OPENAPI_OF_THE_CLIENTS_VERSION, variant],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        served[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    full, cut = served["full"], served["cut"]
    assert cut["cut"] and cut["health"] == full["health"] == 200
    assert cut["versions"][0] == full["versions"][0] == cut["client"]
    assert len(cut["versions"]) < len(full["versions"]) and set(cut["versions"]) < set(full["versions"])
    assert cut["openapi"]["paths"] and cut["openapi"] == full["openapi"]
