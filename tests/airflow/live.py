"""One real local Airflow (`airflow_up`: api-server, scheduler, dag-processor, triggerer on SQLite)
shared by the test modules that need one, and the REST API v2 calls they make.

Starting it costs tens of seconds of a loaded 2-core machine, so it is started once per test session
(``live_airflow`` in tests/airflow/conftest.py) on one pipelines folder. A module that uses it
defines ``live_specs(root) -> {file name: YAML text}``: every collected module's specs are written
into the folder before Airflow starts, so the first parse of the DAG file sees them all.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dagspec.local.airflow_server import AirflowStatus
from dagspec.processes import tail

LIVE_SPECS_HOOK = "live_specs"
RUN_TIMEOUT_S = 1200.0


class Api:
    """The few REST API v2 calls the tests need, with a token from POST /auth/token."""

    def __init__(self, url: str, password: str) -> None:
        self.url = url
        token = self._call("POST", "/auth/token", {"username": "admin", "password": password}, auth=False)
        self.token = str(token["access_token"])

    def _call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from None

    def get(self, path: str) -> Any:
        return self._call("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self._call("POST", path, body)

    def patch(self, path: str, body: Any) -> Any:
        return self._call("PATCH", path, body)


@dataclass
class Airflow:
    """A running Airflow: its status, an API client, the root holding ``pipelines/``, ``airflow/``
    (AIRFLOW_HOME), ``storage/`` (the storage root) and ``run/``, and the admin's password."""

    status: AirflowStatus
    api: Api
    root: Path
    password: str

    @property
    def url(self) -> str:
        assert self.status.url is not None
        return self.status.url


def wait_for_dag(api: Api, dag_id: str, timeout: float = 300.0) -> dict[str, Any]:
    """The DAG as the API lists it, once the dag-processor has parsed it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dags = {d["dag_id"]: d for d in api.get("/api/v2/dags?limit=100")["dags"]}
        if dag_id in dags:
            return dict(dags[dag_id])
        time.sleep(1)
    raise AssertionError(
        f"{dag_id} not parsed within {timeout:.0f} s; import errors: {api.get('/api/v2/importErrors')}"
    )


def wait_for_run(api: Api, dag_id: str, run_id: str, timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """The DAG run, once it has succeeded or failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
        if run["state"] in ("success", "failed"):
            return dict(run)
        time.sleep(1)
    raise AssertionError(f"{dag_id} {run_id} did not finish within {timeout:.0f} s")


def runs(api: Api, dag_id: str, run_type: str | None = None) -> list[dict[str, Any]]:
    """The DAG's runs (of one run type if given), oldest first."""
    query = f"&run_type={run_type}" if run_type else ""
    found = api.get(f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=id{query}")["dag_runs"]
    return list(found)


def task_report(airflow: Airflow, dag_id: str, run_id: str) -> str:
    """The run's task states and the tails of their logs (for a failed assertion)."""
    tasks = airflow.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
    lines = [f"{t['task_id']}: {t['state']} (try {t['try_number']})" for t in tasks]
    for log in sorted((airflow.root / "airflow" / "logs").glob(f"dag_id={dag_id}/run_id={run_id}/*/*.log")):
        lines.append(f"--- {log} ---\n{tail(log, 25)}")
    return "\n".join(lines)


BROWSER_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",  # else Chromium keeps calling home through a closed network
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-first-run",
)


def browser(tmp_path: Path, window: str = "1400,1100") -> Any:
    """Headless Chromium through chromedriver (Debian's packages); the test is skipped without them."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("headless Chromium is not installed: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*BROWSER_FLAGS, f"--window-size={window}", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def login(driver: Any, airflow: Airflow, wait: Any) -> None:
    """Log the browser in to the Airflow UI as admin."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    driver.get(f"{airflow.url}/auth/login")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("admin")
    driver.find_element(By.NAME, "password").send_keys(airflow.password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: "/auth/login" not in d.current_url)
