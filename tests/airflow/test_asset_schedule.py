"""Asset schedules compile into the DAG's schedule: the very assets the upstream DAG's tasks emit."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk import DAG, Asset, AssetAll, AssetAny, AssetOrTimeSchedule, CronTriggerTimetable
from airflow.serialization.serialized_objects import DagSerialization

from dagspec.airflow.compiler import compile_folder
from dagspec.spec.models import INVALID_SPECS_DAG_ID
from tests.conftest import REPO
from tests.helpers import write_spec

INGEST = """
dag_id: ctr_ingest
schedule: "@daily"
start_date: 2026-01-01
stages:
  raw: {kind: read, params: {format: parquet, path: data/in}}
  features: {kind: split, inputs: {data: raw}, params: {fractions: {train: 0.8, test: 0.2}}}
"""
STAGES = "stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"


def _compile(tmp_path: Path, schedule: str) -> dict[str, DAG]:
    folder = tmp_path / "pipelines"
    write_spec(folder, INGEST, "ingest.yaml")
    write_spec(folder, f"dag_id: weekly\nstart_date: 2026-01-01\nschedule: {schedule}\n{STAGES}", "weekly.yaml")
    compiled = compile_folder(folder, home=tmp_path, jobs_dir=REPO / "jobs")
    assert not compiled.errors and INVALID_SPECS_DAG_ID not in compiled.dags
    return compiled.dags


def _emitted(dag: DAG, task_id: str) -> dict[str, Asset]:
    return {asset.name: asset for asset in dag.get_task(task_id).outlets}


def test_one_asset_is_the_very_asset_the_upstream_task_emits(tmp_path: Path) -> None:
    dags = _compile(tmp_path, "{assets: [ctr_ingest.features.train]}")
    schedule = dags["weekly"].timetable.asset_condition
    assert schedule == _emitted(dags["ctr_ingest"], "features")["ctr_ingest.features.train"]
    assert (schedule.name, schedule.uri) == ("ctr_ingest.features.train", "dagspec://ctr_ingest/features/train")
    assert dags["ctr_ingest"].timetable.expression == "0 0 * * *"  # the plain string form is as before


@pytest.mark.parametrize(("when", "condition"), [("all", AssetAll), ("any", AssetAny)])
def test_several_assets_are_all_or_any_of_them(tmp_path: Path, when: str, condition: type) -> None:
    dags = _compile(tmp_path, f"{{assets: [ctr_ingest.features.train, ctr_ingest.raw.data], when: {when}}}")
    schedule = dags["weekly"].timetable.asset_condition
    assert isinstance(schedule, AssetAll | AssetAny) and type(schedule) is condition
    emitted = {**_emitted(dags["ctr_ingest"], "features"), **_emitted(dags["ctr_ingest"], "raw")}
    assert list(schedule.objects) == [emitted["ctr_ingest.features.train"], emitted["ctr_ingest.raw.data"]]


def test_cron_and_assets_is_an_asset_or_time_schedule(tmp_path: Path) -> None:
    dags = _compile(tmp_path, '{cron: "0 6 * * 1", assets: [ctr_ingest.features.test]}')
    timetable = dags["weekly"].timetable
    assert isinstance(timetable, AssetOrTimeSchedule)
    assert timetable.asset_condition == Asset(name="ctr_ingest.features.test", uri="dagspec://ctr_ingest/features/test")
    assert isinstance(timetable.timetable, CronTriggerTimetable)
    assert (timetable.timetable.expression, str(timetable.timetable.timezone)) == ("0 6 * * 1", "UTC")
    # as the dag-processor stores it and the scheduler reads it back
    stored = DagSerialization.from_dict(DagSerialization.to_dict(dags["weekly"])).timetable
    assert (stored.summary, stored.asset_condition.name) == ("Asset or 0 6 * * 1", "ctr_ingest.features.test")


def test_an_unknown_asset_is_an_import_error_of_the_dag_file_and_the_others_still_load(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, INGEST, "ingest.yaml")
    write_spec(folder, f"dag_id: weekly\nschedule: {{assets: [ctr_ingest.featurs.train]}}\n{STAGES}", "weekly.yaml")
    compiled = compile_folder(folder, home=tmp_path, jobs_dir=REPO / "jobs")
    assert set(compiled.dags) == {"ctr_ingest"}  # the errors go to the stand-in of the other DAG file
    assert [str(e) for e in compiled.errors] == [
        "pipelines/weekly.yaml:2:21: schedule.assets[0]: spec 'ctr_ingest' has no output "
        "'ctr_ingest.featurs.train' (did you mean 'ctr_ingest.features.train'?); its outputs: "
        "ctr_ingest.features.test, ctr_ingest.features.train, ctr_ingest.raw.data"
    ]


def test_a_stage_reading_another_specs_output_has_that_output_as_its_inlet(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, INGEST, "ingest.yaml")
    reader = (
        "stages:\n  head: {kind: sample, inputs: {data: {spec: ctr_ingest, output: features.test}}, params: {n: 3}}\n"
    )
    write_spec(folder, f"dag_id: weekly\nschedule: '@weekly'\nstart_date: 2026-01-01\n{reader}", "weekly.yaml")
    compiled = compile_folder(folder, home=tmp_path, jobs_dir=REPO / "jobs")
    assert not compiled.errors
    (inlet,) = compiled.dags["weekly"].get_task("head").inlets
    assert inlet == _emitted(compiled.dags["ctr_ingest"], "features")["ctr_ingest.features.test"]
    assert compiled.dags["ctr_ingest"].get_task("raw").inlets == []
