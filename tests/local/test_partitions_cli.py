"""Partitions through the CLI: `dagspec backfill` and `dagspec run` under real `airflow dags test`,
on day files of real Criteo lines, each partition's rows read back from its committed manifest.

A backfill of the first two days computes them and skips the stage that is not partitioned; a
backfill over four days then computes exactly the two missing ones; a new day file makes the next
run compute that day only, and the reader of every day read all five.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CRITEO_SAMPLE, REPO
from tests.local.test_run import DAGSPEC, env_for

pytestmark = pytest.mark.integration

SPEC = """\
dag_id: daily_parts
default_args: {{retries: 0}}
params:
  input: {{type: string, default: "{days}/day_*.tsv"}}
partitions: {{files: "{{{{ params.input }}}}"}}
spark: {{conf: {{spark.sql.shuffle.partitions: 2}}}}
stages:
  raw: {{kind: read, partitioned: true, params: {{format: tsv, schema: criteo, path: "{{{{ partition.path }}}}"}}}}
  clicks: {{kind: sql, inputs: {{t: raw}}, params: {{query: "SELECT COUNT(*) AS n, SUM(label) AS clicks FROM t"}}}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("partitions-cli")
    (base / "days").mkdir()
    (base / "pipelines").mkdir()
    spec = base / "pipelines" / "daily_parts.yaml"
    spec.write_text(SPEC.format(days=base / "days"))
    return {"base": base, "spec": spec, "storage": base / "storage", "mode": "connect", "airflow": airflow_home}


def _day(project: dict[str, Any], day: int, lines: int) -> None:
    sample = CRITEO_SAMPLE.read_text().splitlines(keepends=True)
    (project["base"] / "days" / f"day_{day:02d}.tsv").write_text("".join(sample[day * 100 : day * 100 + lines]))


def _dagspec(project: dict[str, Any], verb: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [DAGSPEC, verb, str(project["spec"]), "--storage-root", str(project["storage"]), *args]
    done = subprocess.run(cmd, env=env_for(project), capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _computed(project: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """raw's partition -> (the run that computed it, its rows), from the committed manifests."""
    found = {}
    for manifest in (project["storage"] / "daily_parts" / "raw" / "_partitions").glob("*/*/manifest.json"):
        recorded = json.loads(manifest.read_text())
        found[manifest.parent.parent.name] = (recorded["run_id"], recorded["rows"]["data"])
    return found


def test_backfills_compute_exactly_the_missing_days_and_a_new_day_runs_alone(project: dict[str, Any]) -> None:
    for day, lines in enumerate((10, 20, 30, 40)):
        _day(project, day, lines)
    first = _dagspec(project, "backfill", "--from", "day_00", "--to", "day_01")
    assert "backfill of partitions day_00..day_01" in first.stdout
    assert "partitions: 2 computed of 2" in first.stdout and "clicks" in first.stdout
    assert " skipped " in next(line for line in first.stdout.splitlines() if line.strip().startswith("clicks"))
    computed = _computed(project)
    assert {day: rows for day, (_, rows) in computed.items()} == {"day_00": 10, "day_01": 20}

    second = _dagspec(project, "backfill", "--to", "day_03", "--parallel", "2")  # two of the four are missing
    assert "partitions: 2 computed of 4" in second.stdout, second.stdout
    again = _computed(project)
    assert {d: again[d] for d in ("day_00", "day_01")} == {d: computed[d] for d in ("day_00", "day_01")}
    assert again["day_02"][0] == again["day_03"][0] != computed["day_00"][0]  # one run computed both
    assert {day: rows for day, (_, rows) in again.items()} == {"day_00": 10, "day_01": 20, "day_02": 30, "day_03": 40}

    _day(project, 4, 50)  # a new day file: the next run computes it alone, and the reader reads all five
    third = _dagspec(project, "run")
    assert "partitions: 1 computed of 5" in third.stdout, third.stdout
    latest = _computed(project)
    assert {d: latest[d] for d in again} == again and latest["day_04"][1] == 50
    (clicks,) = [
        json.loads(m.read_text()) for m in (project["storage"] / "daily_parts" / "clicks").glob("*/manifest.json")
    ]
    assert set(clicks["inputs"]["t"]["partitions"]) == {f"day_0{i}" for i in range(5)}
    shown = subprocess.run(
        [DAGSPEC, "show", str(project["spec"]), "--json", "--storage-root", str(project["storage"])],
        env=env_for(project),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    rows = {row["name"]: row for row in json.loads(shown.stdout)}
    assert rows["raw"]["partitions"] == {f"day_0{i}": "done" for i in range(5)} and rows["clicks"]["state"] == "done"
