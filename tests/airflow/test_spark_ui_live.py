"""A task's "Spark UI" extra link under the session's Airflow (tests/airflow/live.py): after a run,
the link (Airflow's REST API lists it) leads through dagspec's view, behind Airflow's login, to the
Spark History Server's page of the application that computed the stage, where the stage's jobs are
(found by the tags its manifest records). The History Server itself refuses a request without its
token, and dagspec's view refuses one without Airflow's. Headless Chromium opens the link as a user
does (skipped without Debian's chromium and chromium-driver).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from dagspec.checkpoint import latest
from tests.airflow.live import Airflow, browser, login, task_report, wait_for_dag, wait_for_run
from tests.conftest import CRITEO_SAMPLE

pytestmark = [pytest.mark.ui, pytest.mark.integration, pytest.mark.timeout(1800)]

DAG = "spark_ui_link"


def live_specs(root: Path) -> dict[str, str]:
    (root / "spark_ui.tsv").write_text("".join(CRITEO_SAMPLE.read_text().splitlines(keepends=True)[:50]))
    return {
        "spark_ui_link.yaml": f"dag_id: {DAG}\ndefault_args: {{retries: 1, retry_delay: 1}}\n"
        "spark: {conf: {spark.sql.shuffle.partitions: 2}}\nstages:\n"
        f"  raw: {{kind: read, params: {{format: tsv, path: '{root}/spark_ui.tsv', schema: criteo}}}}\n"
        "  clicks: {kind: sql, inputs: {t: raw}, params: {query: 'SELECT SUM(label) AS clicks FROM t'}}\n"
    }


def _get(url: str, token: str | None = None) -> tuple[int, str, str]:
    """Status, final URL and body of a GET (redirects followed, the token kept)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return int(response.status), response.url, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), url, exc.read().decode(errors="replace")


@pytest.fixture(scope="module")
def finished(live_airflow: Airflow) -> str:
    wait_for_dag(live_airflow.api, DAG)
    live_airflow.api.patch(f"/api/v2/dags/{DAG}", {"is_paused": False})
    run = live_airflow.api.post(f"/api/v2/dags/{DAG}/dagRuns", {"logical_date": None})
    done = wait_for_run(live_airflow.api, DAG, run["dag_run_id"])
    live_airflow.api.patch(f"/api/v2/dags/{DAG}", {"is_paused": True})
    assert done["state"] == "success", task_report(live_airflow, DAG, run["dag_run_id"])
    return str(run["dag_run_id"])


def _link(airflow: Airflow, run_id: str, task: str) -> str:
    path = f"/api/v2/dags/{DAG}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task}/links"
    links = airflow.api.get(path)["extra_links"]
    assert set(links) == {"Spark UI"}, links
    url = str(links["Spark UI"])
    return url if url.startswith("http") else airflow.url + url


def test_a_finished_stages_link_opens_its_application_in_the_history_server_with_its_jobs(
    live_airflow: Airflow, finished: str
) -> None:
    manifest = latest(f"{live_airflow.root}/storage/{DAG}/clicks")
    assert manifest is not None
    spark = (manifest.manifest() or {})["spark"]
    app_id, tags = spark["app_id"], spark["job_tags"]
    assert app_id and tags, spark

    token = live_airflow.api.token
    status, landed, page = _get(_link(live_airflow, finished, "clicks"), token)
    assert status == 200, page[:2000]
    assert landed.endswith(f"/dagspec/spark-history/history/{app_id}/jobs/"), landed
    assert "Spark Jobs" in page and "dagspec-connect" in page

    api = f"{live_airflow.url}/dagspec/spark-history/api/v1/applications/{app_id}/jobs"
    status, _, body = _get(api, token)
    assert status == 200, body[:2000]
    # a Connect server's job carries the stage's session tag as SparkConnect_SessionTag_..._Tag_<tag>
    jobs = [job for job in json.loads(body) if any(t.endswith(f"_Tag_{tag}") for t in job["jobTags"] for tag in tags)]
    assert jobs and all(job["status"] == "SUCCEEDED" for job in jobs), body[:2000]

    # without Airflow's token dagspec's view refuses; the History Server refuses anything without its own
    assert _get(api)[0] == 401
    assert _get(api, "not-a-token")[0] in (401, 403)
    history = live_airflow.status.history
    direct = history.split(" at ", 1)[1].split(",", 1)[0].split()[0]
    assert direct.startswith("http://127.0.0.1:"), history
    assert _get(f"{direct}/api/v1/applications")[0] == 403
    assert _get(f"{direct}/api/v1/applications", token)[0] == 403  # Airflow's token is not the History Server's


def test_a_user_opens_the_link_in_the_browser(live_airflow: Airflow, finished: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    link = _link(live_airflow, finished, "raw")
    driver: Any = browser(tmp_path, "1400,900")
    shot = tmp_path / "spark_history_from_link.png"
    try:
        wait = WebDriverWait(driver, 120)
        login(driver, live_airflow, wait)
        driver.get(link)
        wait.until(ec.presence_of_element_located((By.ID, "completed-summary")))
        assert "Spark Jobs" in driver.title or "Spark Jobs" in driver.page_source
        rows = driver.find_elements(By.CSS_SELECTOR, "#completedJob-table tbody tr")
        assert rows, driver.page_source[:2000]
        driver.save_screenshot(str(shot))
    except BaseException:
        driver.save_screenshot(str(tmp_path / "failure.png"))
        raise
    finally:
        driver.quit()
    print("screenshot:", shot)
