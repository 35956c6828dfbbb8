"""The Airflow UI and REST path, for real: the session's `airflow_up` (api-server, scheduler,
dag-processor and triggerer on SQLite, tests/airflow/live.py), a pipeline triggered through REST
API v2 with overridden params, the trigger form in headless Chromium, and a one-minute schedule
picked up by the scheduler.

Needs Debian's chromium and chromium-driver for the browser test (skipped with the reason
otherwise): `apt-get install -y chromium chromium-driver`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.airflow.live import RUN_TIMEOUT_S, Airflow, browser, login, runs, task_report, wait_for_dag, wait_for_run
from tests.conftest import CRITEO_SAMPLE, REPO

pytestmark = [pytest.mark.ui, pytest.mark.integration, pytest.mark.timeout(1800)]

TRIGGERED = "ctr_demo"
SHIPPED = sorted((REPO / "pipelines").glob("*.yaml"))
SCHEDULED = "every_minute"
SCHEDULED_SPEC = """\
# One cheap stage every minute: the scheduler test's pipeline.
dag_id: every_minute
description: Reads the Criteo sample once a minute
schedule: "* * * * *"
start_date: 2026-01-01
catchup: false
storage: {root: .dagspec/storage}
spark:
  conn_id: spark_default
  conf: {spark.sql.shuffle.partitions: 2}
  resources: {driver_memory: 1g}
stages:
  rows:
    kind: read
    params: {format: tsv, path: "%s", schema: criteo}
"""


def live_specs(root: Path) -> dict[str, str]:
    """The shipped specs and the scheduler test's, in the session's Airflow (tests/airflow/live.py)."""
    specs = {path.name: path.read_text() for path in SHIPPED}
    specs[f"{SCHEDULED}.yaml"] = SCHEDULED_SPEC % CRITEO_SAMPLE
    return specs


@pytest.fixture(scope="module")
def airflow(live_airflow: Airflow) -> Iterator[Airflow]:
    """The session's Airflow, with the every-minute DAG unpaused while this module runs."""
    # unpaused first, so that the scheduler's run happens while the other tests work
    wait_for_dag(live_airflow.api, SCHEDULED)
    live_airflow.api.patch(f"/api/v2/dags/{SCHEDULED}", {"is_paused": False})
    yield live_airflow
    live_airflow.api.patch(f"/api/v2/dags/{SCHEDULED}", {"is_paused": True})  # no more runs for later modules


def test_health_endpoint_reports_every_component(airflow: Airflow) -> None:
    health = airflow.status.health
    assert {health.get(c) for c in ("metadatabase", "scheduler", "dag_processor")} == {"healthy"}
    assert airflow.status.up and set(airflow.status.processes) == {
        "api-server",
        "scheduler",
        "dag-processor",
        "triggerer",
    }
    assert "admin, password in" in str(airflow.status)


def test_rest_trigger_with_overridden_params(airflow: Airflow) -> None:
    half = airflow.root / "criteo_500.tsv"
    half.write_text("".join(CRITEO_SAMPLE.read_text().splitlines(keepends=True)[:500]))
    overrides = {"input": str(half), "test_fraction": 0.5}
    dag = wait_for_dag(airflow.api, TRIGGERED)
    assert dag["is_paused"]  # new DAGs start paused: a trigger alone would stay queued
    airflow.api.patch(f"/api/v2/dags/{TRIGGERED}", {"is_paused": False})
    started = time.monotonic()
    run = airflow.api.post(f"/api/v2/dags/{TRIGGERED}/dagRuns", {"logical_date": None, "conf": overrides})
    assert run["conf"] == overrides and run["run_type"] == "manual"
    done = wait_for_run(airflow.api, TRIGGERED, run["dag_run_id"])
    print(f"{TRIGGERED} via REST: {done['state']} in {time.monotonic() - started:.1f} s")
    assert done["state"] == "success", task_report(airflow, TRIGGERED, run["dag_run_id"])

    spec = load_spec(REPO / "pipelines" / f"{TRIGGERED}.yaml")
    storage = str(airflow.root / "storage")
    plan = resolve_pipeline(spec, default_context(spec, overrides), home=REPO, storage_root=storage)
    manifests = {name: stage.checkpoint.manifest() for name, stage in plan.items()}
    assert all(manifests.values()), f"stages without a committed checkpoint: {manifests}"
    raw, split = manifests["raw"], manifests["split"]
    assert raw is not None and split is not None
    # the overrides reached the stages: the other file (500 rows, not 1000) and a 50/50 split
    assert raw["params"]["path"] == str(half)
    assert raw["rows"] == {"data": 500}
    assert split["params"]["fractions"] == {"train": 0.5, "test": 0.5}
    assert abs(split["rows"]["train"] - split["rows"]["test"]) <= 0.5 * sum(split["rows"].values())
    # and nothing was computed with the defaults
    defaults = resolve_pipeline(spec, default_context(spec), home=REPO, storage_root=storage)
    assert defaults["raw"].checkpoint.manifest() is None and defaults["split"].checkpoint.manifest() is None


def test_trigger_form_shows_the_specs_params(airflow: Airflow, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    spec = load_spec(REPO / "pipelines" / f"{TRIGGERED}.yaml")
    driver = browser(tmp_path)
    screenshot = tmp_path / "trigger_form.png"
    try:
        wait = WebDriverWait(driver, 120)
        login(driver, airflow, wait)

        driver.get(f"{airflow.url}/dags/{TRIGGERED}")
        wait.until(ec.element_to_be_clickable((By.XPATH, "//button[normalize-space()='Trigger']"))).click()
        form = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "[data-testid=config-form]")))
        for name, param in spec.params.items():
            field = form.find_element(By.NAME, f"element_{name}")
            group = field.find_element(By.XPATH, "./ancestor::*[@role='group'][1]")
            assert group.find_element(By.TAG_NAME, "label").text.split()[0] == name
            assert field.get_attribute("value") == str(param.default), name
            helper = driver.find_element(By.ID, str(field.get_attribute("aria-describedby")))
            assert helper.text == param.description, name
        driver.save_screenshot(str(screenshot))
    except BaseException:
        driver.save_screenshot(str(screenshot))
        raise
    finally:
        driver.quit()
    print(f"screenshot: {screenshot}")
    assert screenshot.stat().st_size > 10_000


def test_every_shipped_dag_triggers_from_its_form_with_the_defaults(airflow: Airflow, tmp_path: Path) -> None:
    """Trigger enabled with the shipped defaults, and clicking it creates a run; the DAGs are
    paused first (the run stays queued, nothing computes) and "unpause on trigger" is unticked."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    dag_ids = [load_spec(path).dag_id for path in SHIPPED]
    for dag_id in dag_ids:
        wait_for_dag(airflow.api, dag_id)
        airflow.api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": True})
    driver = browser(tmp_path)
    screenshots: list[Path] = []
    try:
        wait = WebDriverWait(driver, 120)
        login(driver, airflow, wait)
        for dag_id in dag_ids:
            before = {r["dag_run_id"] for r in runs(airflow.api, dag_id)}
            screenshot = tmp_path / f"trigger_form_{dag_id}.png"
            screenshots.append(screenshot)
            driver.get(f"{airflow.url}/dags/{dag_id}")
            wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]"))).click()
            wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "[data-testid=config-form]")))
            for box in driver.find_elements(By.XPATH, "//label[contains(., 'Unpause')]"):
                if box.find_element(By.TAG_NAME, "input").is_selected():
                    box.click()
            submit = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid=trigger-dag-submit]")))
            time.sleep(1)  # the form validates its fields once rendered
            driver.save_screenshot(str(screenshot))
            assert submit.is_enabled(), f"{dag_id}: Trigger is disabled with the defaults (see {screenshot})"
            submit.click()
            deadline = time.monotonic() + 60
            while not {r["dag_run_id"] for r in runs(airflow.api, dag_id)} - before:
                assert time.monotonic() < deadline, f"{dag_id}: the trigger created no run"
                time.sleep(1)
            assert airflow.api.get(f"/api/v2/dags/{dag_id}")["is_paused"], f"{dag_id} was unpaused"
    except BaseException:
        driver.save_screenshot(str(tmp_path / "failure.png"))
        raise
    finally:
        driver.quit()
    print("screenshots:", ", ".join(str(s) for s in screenshots))
    assert all(s.stat().st_size > 10_000 for s in screenshots)


def test_one_minute_schedule_gets_a_scheduled_run(airflow: Airflow) -> None:
    dag = airflow.api.get(f"/api/v2/dags/{SCHEDULED}")
    assert dag["timetable_summary"] == "* * * * *" and not dag["is_paused"]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    finished: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        runs = airflow.api.get(f"/api/v2/dags/{SCHEDULED}/dagRuns?run_type=scheduled&limit=20")["dag_runs"]
        finished = [r for r in runs if r["state"] in ("success", "failed")]
        if finished:
            break
        time.sleep(1)
    assert finished, f"no scheduled run of {SCHEDULED} finished within {RUN_TIMEOUT_S:.0f} s"
    run = finished[0]
    assert run["run_type"] == "scheduled" and run["triggered_by"] != "rest_api"
    assert run["state"] == "success", task_report(airflow, SCHEDULED, run["dag_run_id"])
    assert os.listdir(airflow.root / "storage" / SCHEDULED / "rows")
