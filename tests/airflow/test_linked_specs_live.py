"""Specs linked through their data under the session's running Airflow (scheduler, dag-processor,
triggerer; tests/airflow/live.py), as a user sees them.

- ``linked_a`` reads a small TSV; ``linked_b`` is scheduled on ``linked_a.raw.data`` and reads it
  (``{spec: linked_a, output: raw.data}``, its task's inlet): a run of A triggered through the REST
  API makes the scheduler run B by itself, and B's rows are rows of the checkpoint A committed.
- ``linked_c`` is scheduled on ``{files: <root>/incoming/day_*.tsv}`` and partitioned by those files:
  one new file makes exactly one run, two files landing at once one more, and later polls none (the
  seen files hold); each run computes only the days it has not committed (a partition per day), and
  its asset events carry those days as Airflow partition keys.
- ``linked_d`` is partitioned by four day files already there and not scheduled: a run triggered
  with the form's ``partitions`` param (a backfill) computes exactly the range's missing days.

An unknown asset name is a ``file:line:col`` error of the DAG file and of ``dagspec validate``
(tests/airflow/test_asset_schedule.py, tests/spec/test_asset_schedule.py); it is not put into this
folder, which the other modules' DAGs share.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from dagspec.checkpoint import latest
from tests.airflow.live import Airflow, Api, runs, task_report, wait_for_dag, wait_for_run
from tests.conftest import CRITEO_SAMPLE

pytestmark = [pytest.mark.ui, pytest.mark.integration, pytest.mark.timeout(1800)]

POLL_INTERVAL_S = 1
WAIT_S = 900.0
DAG_IDS = ("linked_a", "linked_b", "linked_c", "linked_d")


def _criteo_lines(start: int, count: int) -> str:
    return "".join(CRITEO_SAMPLE.read_text().splitlines(keepends=True)[start : start + count])


def live_specs(root: Path) -> dict[str, str]:
    """Three tiny specs for the session's Airflow, and A's input file."""
    (root / "linked_a.tsv").write_text(_criteo_lines(0, 40))
    (root / "incoming").mkdir()
    (root / "backfill").mkdir()
    for day in range(4):
        (root / "backfill" / f"day_0{day}.tsv").write_text(_criteo_lines(400 + 100 * day, 10 + 5 * day))
    # one retry: a stage fails when dagspec's code changes under the Connect server (it restarts)
    spark = "spark: {conf: {spark.sql.shuffle.partitions: 2}}\ndefault_args: {retries: 1, retry_delay: 1}\n"
    days = f"{root}/incoming/day_*.tsv"
    return {
        "linked_a.yaml": f"dag_id: linked_a\n{spark}stages:\n"
        f"  raw: {{kind: read, params: {{format: tsv, path: '{root}/linked_a.tsv', schema: criteo}}}}\n",
        "linked_b.yaml": f"dag_id: linked_b\n{spark}schedule: {{assets: [linked_a.raw.data]}}\nstages:\n"
        "  head: {kind: sample, inputs: {data: {spec: linked_a, output: raw.data}}, params: {n: 5, seed: 2}}\n",
        # partitioned: a partition per day file, so a run computes only the days it has not committed
        "linked_c.yaml": f"dag_id: linked_c\n{spark}"
        f"schedule: {{files: '{days}', poll_interval: {POLL_INTERVAL_S}}}\npartitions: {{files: '{days}'}}\nstages:\n"
        "  raw: {kind: read, partitioned: true, params: {format: tsv, path: '{{ partition.path }}', schema: criteo}}\n"
        "  total: {kind: sql, inputs: {days: raw}, params: {query: 'SELECT COUNT(*) AS n FROM days'}}\n",
        "linked_d.yaml": f"dag_id: linked_d\n{spark}partitions: {{files: '{root}/backfill/day_*.tsv'}}\nstages:\n"
        "  raw: {kind: read, partitioned: true, params: {format: tsv, path: '{{ partition.path }}', schema: criteo}}\n"
        "  total: {kind: sql, inputs: {days: raw}, params: {query: 'SELECT COUNT(*) AS n FROM days'}}\n",
    }


@pytest.fixture(scope="module")
def linked(live_airflow: Airflow) -> Iterator[Airflow]:
    """B and C unpaused before anything runs (Airflow queues runs, and starts watchers, for unpaused
    DAGs only); every one of them paused again afterwards."""
    for dag_id in DAG_IDS:
        assert wait_for_dag(live_airflow.api, dag_id)["is_paused"]
    for dag_id in ("linked_b", "linked_c"):
        live_airflow.api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": False})
    started = time.monotonic()
    yield live_airflow
    print(f"linked specs: {time.monotonic() - started:.1f} s")
    for dag_id in DAG_IDS:
        live_airflow.api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": True})


def _finished_runs(airflow: Airflow, dag_id: str, count: int) -> list[dict[str, Any]]:
    """The DAG's first ``count`` runs, once they have all finished, each asserted a success."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = runs(airflow.api, dag_id)
        if len(found) >= count and all(r["state"] in ("success", "failed") for r in found[:count]):
            for run in found[:count]:
                assert run["state"] == "success", task_report(airflow, dag_id, run["dag_run_id"])
            return found[:count]
        time.sleep(1)
    raise AssertionError(
        f"{dag_id}: {count} finished run(s) not there within {WAIT_S:.0f} s: {runs(airflow.api, dag_id)}"
    )


def _computed(airflow: Airflow, dag_id: str) -> dict[str, tuple[str, int]]:
    """raw's partition -> (the run that computed it, its rows), from the committed manifests."""
    computed = {}
    for manifest in (airflow.root / "storage" / dag_id / "raw" / "_partitions").glob("*/*/manifest.json"):
        recorded = json.loads(manifest.read_text())
        computed[manifest.parent.parent.name] = (recorded["run_id"], recorded["rows"]["data"])
    return computed


def _consumed(api: Api, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    return list(api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/upstreamAssetEvents")["asset_events"])


def _rows(path: str) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in pq.read_table(path).to_pylist())


def test_a_run_of_a_makes_the_scheduler_run_b_on_the_rows_a_committed(linked: Airflow) -> None:
    started = time.monotonic()
    linked.api.patch("/api/v2/dags/linked_a", {"is_paused": False})
    run = linked.api.post("/api/v2/dags/linked_a/dagRuns", {"logical_date": None})
    done = wait_for_run(linked.api, "linked_a", run["dag_run_id"])
    assert done["state"] == "success", task_report(linked, "linked_a", run["dag_run_id"])

    (b_run,) = _finished_runs(linked, "linked_b", 1)
    print(f"A via REST, then B by the scheduler: {time.monotonic() - started:.1f} s")
    assert b_run["run_type"] == "asset_triggered"
    events = _consumed(linked.api, "linked_b", b_run["dag_run_id"])
    assert [(e["name"], e["source_dag_id"], e["source_run_id"]) for e in events] == [
        ("linked_a.raw.data", "linked_a", run["dag_run_id"])
    ]
    (asset,) = linked.api.get("/api/v2/assets?name_pattern=linked_a.raw.data")["assets"]
    assert [(t["dag_id"], t["task_id"]) for t in asset["consuming_tasks"]] == [("linked_b", "head")]
    assert [d["dag_id"] for d in asset["scheduled_dags"]] == ["linked_b"]
    storage = linked.root / "storage"
    upstream, head = latest(f"{storage}/linked_a/raw"), latest(f"{storage}/linked_b/head")
    assert upstream is not None and head is not None
    manifest = head.manifest()
    assert manifest is not None and manifest["inputs"]["data"]["path"] == upstream.output_path("data")
    a_rows, b_rows = _rows(upstream.output_path("data")), _rows(head.output_path("data"))
    assert len(a_rows) == 40 and len(b_rows) == 5 and set(b_rows) <= set(a_rows)


def test_new_files_run_c_once_per_batch_and_seen_files_never_again(linked: Airflow) -> None:
    started = time.monotonic()
    incoming = linked.root / "incoming"
    (incoming / "day_00.tsv").write_text(_criteo_lines(100, 10))
    (first,) = _finished_runs(linked, "linked_c", 1)
    print(f"C on one new file: {time.monotonic() - started:.1f} s")
    assert len(runs(linked.api, "linked_c")) == 1

    for day, start in (("day_01.tsv", 200), ("day_02.tsv", 300)):  # both land within one poll
        (incoming / f".{day}.tmp").write_text(_criteo_lines(start, 10))
    for day in ("day_01.tsv", "day_02.tsv"):
        os.replace(incoming / f".{day}.tmp", incoming / day)
    second = _finished_runs(linked, "linked_c", 2)[1]
    time.sleep(4 * POLL_INTERVAL_S)  # more polls of the same files: no event, no run
    print(f"C on one file, then on two: {time.monotonic() - started:.1f} s")

    assert [r["run_type"] for r in runs(linked.api, "linked_c")] == ["asset_triggered"] * 2
    batches = [
        [sorted(e["extra"]["payload"]["files"]) for e in _consumed(linked.api, "linked_c", r["dag_run_id"])]
        for r in (first, second)
    ]
    assert batches == [[[str(incoming / "day_00.tsv")]], [[str(incoming / f"day_0{i}.tsv") for i in (1, 2)]]]
    # each run computed only its new days: day_00 by the first run, day_01 and day_02 by the second
    assert _computed(linked, "linked_c") == {
        "day_00": (first["dag_run_id"], 10),
        "day_01": (second["dag_run_id"], 10),
        "day_02": (second["dag_run_id"], 10),
    }
    # the reader of every partition read all three days; Airflow's asset events name the partitions
    totals = [
        json.loads(m.read_text()) for m in (linked.root / "storage" / "linked_c" / "total").glob("*/manifest.json")
    ]
    newest = max(totals, key=lambda m: m["finished"])
    assert newest["inputs"]["days"]["partitions"].keys() == {"day_00", "day_01", "day_02"}
    events = linked.api.get("/api/v2/assets/events?source_dag_id=linked_c&limit=100")["asset_events"]
    keyed = sorted((e["source_run_id"], e.get("partition_key")) for e in events if e["name"] == "linked_c.raw.data")
    assert keyed == sorted(
        [(first["dag_run_id"], "day_00"), (second["dag_run_id"], "day_01"), (second["dag_run_id"], "day_02")]
    ), events


def _triggered(airflow: Airflow, dag_id: str, partitions: str) -> str:
    """A run triggered through the REST API with the form's ``partitions`` param, once it succeeded."""
    run = airflow.api.post(f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {"partitions": partitions}})
    done = wait_for_run(airflow.api, dag_id, run["dag_run_id"])
    assert done["state"] == "success", task_report(airflow, dag_id, run["dag_run_id"])
    return str(run["dag_run_id"])


def test_a_backfill_from_the_form_computes_exactly_the_missing_days_of_its_range(linked: Airflow) -> None:
    started = time.monotonic()
    linked.api.patch("/api/v2/dags/linked_d", {"is_paused": False})
    first = _triggered(linked, "linked_d", "..day_01")
    assert _computed(linked, "linked_d") == {"day_00": (first, 10), "day_01": (first, 15)}
    states = {t["task_id"]: t["state"] for t in _task_instances(linked.api, "linked_d", first)}
    assert states == {"raw": "success", "total": "skipped"}, states  # a scoped run runs the partitioned stages only

    second = _triggered(linked, "linked_d", "day_00..day_03")  # two of the range's four days are missing
    print(f"D: two backfills under the scheduler: {time.monotonic() - started:.1f} s")
    assert _computed(linked, "linked_d") == {
        "day_00": (first, 10),
        "day_01": (first, 15),
        "day_02": (second, 20),
        "day_03": (second, 25),
    }
    events = linked.api.get("/api/v2/assets/events?source_dag_id=linked_d&limit=100")["asset_events"]
    keyed = sorted((e["source_run_id"], e.get("partition_key")) for e in events if e["name"] == "linked_d.raw.data")
    assert keyed == sorted((run, f"day_0{day}") for run, day in ((first, 0), (first, 1), (second, 2), (second, 3)))


def _task_instances(api: Api, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    return list(api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"])
