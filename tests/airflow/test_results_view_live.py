"""dagspec's view inside the real Airflow UI: a small run of the topology classifier under the
session's Airflow (tests/airflow/live.py), then headless Chromium opens the run's and the comparison
task's "dagspec" tabs and finds the stages, the AUC table and the ROC plot; the API server refuses
the view without a token. Over HTTP, an older run's page keeps showing its own fingerprints and rows
after a newer run read a grown input file (a one-stage spec: two runs cost two small stages).

The spec is the shipped topology_classifier.yaml cut to one model (6 tasks instead of 17: the three
trainings, checks, exports and predictions took 7 minutes of a loaded 2-core machine), under its
own dag_id. Needs Debian's chromium and chromium-driver (skipped otherwise).
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from dagspec.local.airflow_server import PASSWORD_FILE
from tests.airflow.live import Airflow, browser, login, task_report, wait_for_dag, wait_for_run

pytestmark = [pytest.mark.ui, pytest.mark.integration, pytest.mark.timeout(1800)]

DAG = "topology_view"
# the shipped spec's stages up to its comparison, for one model, on ~170 balanced events
SPEC = """\
dag_id: topology_view
description: The topology classifier cut to one model (the UI view's live test)
schedule: null
start_date: 2026-01-01
default_args: {retries: 1, retry_delay: 1}   # a stage fails when dagspec's code changes under the Connect server
params:
  events: {type: integer, default: 3000, minimum: 100}
  epochs: {type: integer, default: 2, minimum: 1}
storage: {root: .dagspec/storage}
spark:
  conf: {spark.sql.shuffle.partitions: 2}
stages:
  events: {kind: generate_physics_events, params: {events: "{{ params.events }}", seed: 42, max_particles: 8}}
  features: {kind: topology_features, inputs: {data: events}, params: {max_particles: 8, keep_raw: false}}
  split:
    kind: split
    inputs: {data: features}
    params: {fractions: {train: 0.8, test: 0.2}, seed: 42, key: [event_id]}
  hlf_classifier:
    kind: train_keras
    inputs: {train: split.train, validation: split.test}
    params: {architecture: hlf_dense, epochs: "{{ params.epochs }}", batch_size: 128}
  hlf_eval:   # no bootstrap intervals: 30 of the test's seconds on a loaded machine
    kind: evaluate
    inputs: {model: hlf_classifier, data: split.test}
    params: {bootstrap_replicates: 0}
  comparison:
    kind: compare
    inputs: {hlf_dense: hlf_eval}
    params: {title: Topology classifier, reference: {hlf_dense: 0.982}, reference_class: "1"}
"""


HISTORY_DAG = "view_history"
# one stage reading a CSV file that grows between two runs: each run commits another fingerprint
HISTORY_SPEC = """\
dag_id: view_history
schedule: null
start_date: 2026-01-01
default_args: {{retries: 1, retry_delay: 1}}
params:
  input: {{type: string, default: {input}}}
storage: {{root: .dagspec/storage}}
stages:
  raw: {{kind: read, params: {{format: csv, header: true, path: "{{{{ params.input }}}}", schema: "x INT, y INT"}}}}
"""


def live_specs(root: Path) -> dict[str, str]:
    """The cut topology spec and the one-stage history spec, for the session's Airflow."""
    return {f"{DAG}.yaml": SPEC, f"{HISTORY_DAG}.yaml": HISTORY_SPEC.format(input=root / "history.csv")}


@pytest.fixture(scope="module")
def finished_run(live_airflow: Airflow) -> str:
    """A topology run with small params, triggered through the REST API; green."""
    api = live_airflow.api
    wait_for_dag(api, DAG)
    api.patch(f"/api/v2/dags/{DAG}", {"is_paused": False})
    started = time.monotonic()
    run_id = str(api.post(f"/api/v2/dags/{DAG}/dagRuns", {"logical_date": None})["dag_run_id"])
    try:
        state = wait_for_run(api, DAG, run_id)["state"]
    finally:
        api.patch(f"/api/v2/dags/{DAG}", {"is_paused": True})
    print(f"{DAG}: {state} in {time.monotonic() - started:.1f} s")
    assert state == "success", task_report(live_airflow, DAG, run_id)
    return run_id


def _trigger(airflow: Airflow, dag_id: str) -> str:
    """One run of ``dag_id`` through the REST API, green; its run id."""
    api = airflow.api
    wait_for_dag(api, dag_id)
    api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": False})
    run_id = str(api.post(f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None})["dag_run_id"])
    try:
        state = wait_for_run(api, dag_id, run_id)["state"]
    finally:
        api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": True})
    assert state == "success", task_report(airflow, dag_id, run_id)
    return run_id


def _page(url: str, token: str) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return str(response.read().decode())


def test_an_older_runs_page_shows_its_own_results_after_a_newer_run_changed_the_input(live_airflow: Airflow) -> None:
    data = live_airflow.root / "history.csv"
    data.write_text("x,y\n1,1\n2,2\n3,3\n")
    first = _trigger(live_airflow, HISTORY_DAG)
    with data.open("a") as handle:
        handle.write("4,4\n")
    second = _trigger(live_airflow, HISTORY_DAG)
    api = live_airflow.api
    committed = {}  # run -> the fingerprint its asset event says its stage committed (Airflow's own record)
    for run in (first, second):
        events = api.get(f"/api/v2/assets/events?source_dag_id={HISTORY_DAG}&source_run_id={quote(run, safe='')}")
        (event,) = events["asset_events"]
        committed[run] = event["extra"]["fingerprint"]
    assert committed[first] != committed[second]
    pages = {
        run: _page(f"{live_airflow.url}/dagspec/dags/{HISTORY_DAG}/runs/{quote(run, safe='')}", api.token)
        for run in (first, second)
    }
    older = pages[first]
    assert committed[first] in older and committed[second] not in older
    assert 'class="ran">ran<' in older and '<td class="num">3</td>' in older and '<td class="num">4</td>' not in older
    assert committed[second] in pages[second] and '<td class="num">4</td>' in pages[second]


def _status(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_view_needs_airflows_token(live_airflow: Airflow, finished_run: str) -> None:
    page = f"{live_airflow.url}/dagspec/dags/{DAG}/runs/{quote(finished_run, safe='')}"
    assert _status(page) == 401
    assert _status(page, "not-a-token") in (401, 403)
    assert _status(page, live_airflow.api.token) == 200


def _in_frame(driver: Any, wait: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait.until(ec.frame_to_be_available_and_switch_to_it((By.CSS_SELECTOR, "iframe[title^='dagspec']")))


def test_the_run_and_task_pages_show_the_stages_the_auc_table_and_the_roc_plot(
    live_airflow: Airflow, finished_run: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    run = quote(finished_run, safe="")
    driver = browser(tmp_path, "1400,1000")
    shots = {name: tmp_path / f"{name}.png" for name in ("run", "stage")}
    try:
        wait = WebDriverWait(driver, 120)
        login(driver, live_airflow, wait)
        # the run page's "dagspec results" tab: every stage, green
        driver.get(f"{live_airflow.url}/dags/{DAG}/runs/{run}/plugin/dagspec_run")
        _in_frame(driver, wait)
        stages = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "table.stages")))
        names = [a.text for a in stages.find_elements(By.CSS_SELECTOR, "tbody tr td:first-child a")]
        assert names == ["events", "features", "split", "hlf_classifier", "hlf_eval", "comparison"]
        assert "success" in stages.text and "ran" in stages.text
        driver.switch_to.default_content()
        driver.save_screenshot(str(shots["run"]))
        # the comparison task's "dagspec stage" tab: its report's AUC table and ROC plot
        driver.get(f"{live_airflow.url}/dags/{DAG}/runs/{run}/tasks/comparison/plugin/dagspec_stage")
        _in_frame(driver, wait)
        report = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "div.report table")))
        headers = [th.text for th in report.find_elements(By.TAG_NAME, "th")]
        assert {"model", "roc_auc", "auc_QCD", "auc_tt", "auc_W+jets"} <= set(headers), headers
        models = [tr.find_element(By.TAG_NAME, "td").text for tr in report.find_elements(By.CSS_SELECTOR, "tbody tr")]
        assert models == ["hlf_dense"]
        plot = driver.find_element(By.CSS_SELECTOR, "img[alt='report/roc.png']")
        assert driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", plot) > 300
        driver.switch_to.default_content()
        driver.save_screenshot(str(shots["stage"]))
    except BaseException:
        driver.save_screenshot(str(tmp_path / "failure.png"))
        raise
    finally:
        driver.quit()
    print("screenshots:", ", ".join(str(s) for s in shots.values()))


def test_the_api_server_serves_files_of_committed_outputs_only(live_airflow: Airflow, finished_run: str) -> None:
    # the stage page links its report's files; Airflow's own password file (AIRFLOW_HOME is beside
    # the storage root) and the API server's /proc are out of reach however the path is written
    token, base = live_airflow.api.token, f"{live_airflow.url}/dagspec/dags/{DAG}"
    with urllib.request.urlopen(
        urllib.request.Request(
            f"{base}/runs/{quote(finished_run, safe='')}/stages/comparison",
            headers={"Authorization": f"Bearer {token}"},
        ),
        timeout=60,
    ) as response:
        page = response.read().decode()
    linked = sorted(set(re.findall(rf'href="[^"]*/dagspec/dags/{DAG}/files/([^"]+)"', page)))
    assert any(p.endswith("/report/roc.png") for p in linked), linked
    assert all(_status(f"{base}/files/{p}", token) == 200 for p in linked)
    password = f"airflow/{PASSWORD_FILE}"
    assert (live_airflow.root / password).exists()
    for path in (
        f"..%2F..%2F{quote(password, safe='')}",
        f"%2E%2E/%2E%2E/{password}",
        quote(str(live_airflow.root / password), safe=""),
        "%2Fproc%2Fself%2Fcmdline",
        f"{linked[0].split('/report/')[0]}/manifest.json",
    ):
        assert _status(f"{base}/files/{path}", token) == 404, path
