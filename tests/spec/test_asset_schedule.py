"""Asset schedules: the forms a spec may write, and the names checked against the folder's specs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError
from dagspec.spec.loader import load_spec, spec_files
from dagspec.spec.schedule import AssetSchedule
from dagspec.spec.together import load_specs
from tests.conftest import REPO
from tests.helpers import write_spec

STAGES = "stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"
INGEST = (
    "dag_id: ctr_ingest\n" + STAGES + "  features: {kind: split, inputs: {data: raw}, "
    "params: {fractions: {train: 0.8, test: 0.2}}}\n"
)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("{assets: [a.x.data]}", AssetSchedule(assets=["a.x.data"])),
        ("{assets: [a.x.data, b.y.data], when: any}", AssetSchedule(assets=["a.x.data", "b.y.data"], when="any")),
        ('{cron: "@daily", assets: [a.b.x.data]}', AssetSchedule(assets=["a.b.x.data"], cron="@daily")),
        ('"0 3 * * *"', "0 3 * * *"),
        ("null", None),
    ],
)
def test_the_schedule_forms(tmp_path: Path, schedule: str, expected: object) -> None:
    spec = load_spec(write_spec(tmp_path, f"schedule: {schedule}\nstart_date: 2026-01-01\n{STAGES}"))
    assert spec.schedule == expected


@pytest.mark.parametrize(
    ("schedule", "error"),
    [
        ("{assets: [a.x.data], whn: any}", "1:32: schedule.whn: unknown key 'whn' (did you mean 'when'?)"),
        ("{assets: [a.x.data], when: some}", "1:38: schedule.when: Input should be 'all' or 'any' (got 'some')"),
        ("{assets: [a.x.data, x.data]}", "1:31: schedule.assets[1]: expected '<dag_id>.<stage>.<output>'"),
        ("{assets: []}", "1:20: schedule.assets: List should have at least 1 item"),
        ("{assets: [a.x.data, a.x.data]}", "1:20: schedule.assets: listed more than once: a.x.data"),
        ('{cron: "@once", assets: [a.x.data]}', "1:18: schedule.cron: expected a cron expression, one of ['@daily',"),
        ('{cron: "@daily", assets: [a.x.data]}', "1:1: start_date is required when schedule is set to a time"),
        ('"every day"', "1:11: schedule: expected a cron expression, one of ['@continuous',"),
        ("3", "1:11: schedule: Input should be a valid string (got 3)"),
    ],
)
def test_a_wrong_schedule_says_where(tmp_path: Path, schedule: str, error: str) -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec(write_spec(tmp_path, f"schedule: {schedule}\n{STAGES}"), "p.yaml")
    assert str(caught.value).startswith(f"p.yaml:{error}")


def test_an_asset_schedule_needs_no_start_date(tmp_path: Path) -> None:
    assert load_spec(write_spec(tmp_path, f"schedule: {{assets: [a.x.data]}}\n{STAGES}")).start_date is None


def _load(folder: Path) -> dict[str, str]:
    """file name -> 'ok' or its error text."""
    loaded = load_specs(spec_files(folder), lambda p: p.name)
    return {item.file: "ok" if item.spec else str(item.error) for item in loaded}


def test_unknown_names_say_where_and_what_was_meant(tmp_path: Path) -> None:
    write_spec(tmp_path, INGEST, "ingest.yaml")
    weekly = "schedule:\n  assets:\n    - ctr_ingest.features.train\n    - ctr_ingest.featres.test\n"
    write_spec(tmp_path, weekly + "    - ctr_ingst.raw.data\n" + STAGES, "weekly.yaml")
    assert _load(tmp_path) == {
        "ingest.yaml": "ok",
        "weekly.yaml": "weekly.yaml:4:7: schedule.assets[1]: spec 'ctr_ingest' has no output "
        "'ctr_ingest.featres.test' (did you mean 'ctr_ingest.features.test'?); its outputs: "
        "ctr_ingest.features.test, ctr_ingest.features.train, ctr_ingest.raw.data\n"
        "weekly.yaml:5:7: schedule.assets[2]: unknown asset 'ctr_ingst.raw.data' (did you mean "
        "'ctr_ingest.raw.data'?): no spec read with this one has dag_id 'ctr_ingst' (an asset is "
        "'<dag_id>.<stage>.<output>' of another spec of the folder; specs: ctr_ingest, weekly)",
    }


def test_a_cycle_fails_every_spec_in_it_naming_them_all(tmp_path: Path) -> None:
    for name, waits_for in [("a", "b"), ("b", "c"), ("c", "a")]:
        write_spec(tmp_path, f"schedule: {{assets: [{waits_for}.raw.data]}}\n{STAGES}", f"{name}.yaml")
    write_spec(tmp_path, f"schedule: {{assets: [a.raw.data]}}\n{STAGES}", "d.yaml")  # downstream of it, no part
    cycle = (
        "schedule.assets[0]: specs scheduled on each other's outputs form a cycle, so none would run first: "
        "a (a.yaml:1:21), b (b.yaml:1:21), c (c.yaml:1:21)"
    )
    assert _load(tmp_path) == {"a.yaml": f"a.yaml:1:21: {cycle}", "b.yaml": f"b.yaml:1:21: {cycle}",
                               "c.yaml": f"c.yaml:1:21: {cycle}", "d.yaml": "ok"}  # fmt: skip


def test_a_spec_cannot_wait_for_itself(tmp_path: Path) -> None:
    write_spec(tmp_path, f"schedule: {{assets: [a.raw.data]}}\n{STAGES}", "a.yaml")
    assert _load(tmp_path)["a.yaml"] == (
        "a.yaml:1:21: schedule.assets[0]: 'a.raw.data' is an output of this spec; "
        "a spec cannot be scheduled on its own outputs"
    )


def test_a_name_of_an_invalid_spec_is_left_to_that_specs_own_errors(tmp_path: Path) -> None:
    write_spec(tmp_path, "dag_id: up\nstages:\n  raw: {kind: reed}\n", "up.yaml")
    write_spec(tmp_path, f"schedule: {{assets: [up.raw.data]}}\n{STAGES}", "down.yaml")
    found = _load(tmp_path)
    assert found["down.yaml"] == "ok" and "unknown stage kind 'reed'" in found["up.yaml"]


def test_validate_one_file_checks_it_against_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, INGEST, "ingest.yaml")
    down = write_spec(folder, f"schedule: {{assets: [ctr_ingest.features.tran]}}\n{STAGES}", "down.yaml")
    env = {**os.environ, "DAGSPEC_HOME": str(REPO)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dagspec"), "validate", str(down)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert ":1:21: schedule.assets[0]: spec 'ctr_ingest' has no output 'ctr_ingest.features.tran' (did you mean " in (
        done.stderr
    )
