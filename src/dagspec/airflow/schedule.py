"""A spec's ``schedule`` as the DAG's: a cron string or preset as is, an asset schedule as Airflow's
asset condition (``Asset``, ``AssetAll``, ``AssetAny``), with ``cron`` an ``AssetOrTimeSchedule``.

The assets are built by ``stage_asset``, the very function that names each task's outlets, so a
scheduled DAG waits for the asset objects (name and URI) the upstream DAG's tasks emit.
A files schedule is an asset of the DAG's own, updated by an ``AssetWatcher`` running
``NewFilesTrigger`` in the triggerer (``dagspec.airflow.new_files``).
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import (
    Asset,
    AssetAll,
    AssetAny,
    AssetOrTimeSchedule,
    AssetWatcher,
    CronDataIntervalTimetable,
    CronTriggerTimetable,
)
from airflow.sdk.bases.timetable import BaseTimetable
from airflow.sdk.configuration import conf

from dagspec import storage
from dagspec.airflow.new_files import NewFilesTrigger, state_path
from dagspec.airflow.operator import stage_asset
from dagspec.plan.resolve import resolve_storage_root
from dagspec.spec.models import PipelineSpec
from dagspec.spec.schedule import AssetSchedule, FilesSchedule, split_asset_name

DagSchedule = str | Asset | AssetAll | AssetAny | AssetOrTimeSchedule | None


def dag_schedule(spec: PipelineSpec, home: Path | None = None) -> DagSchedule:
    """The ``schedule`` argument of the spec's DAG."""
    schedule = spec.schedule
    if isinstance(schedule, FilesSchedule):
        return files_asset(spec, schedule, home or storage.project_home())
    if not isinstance(schedule, AssetSchedule):
        return schedule
    condition = asset_condition(schedule)
    if schedule.cron is None:
        return condition
    return AssetOrTimeSchedule(timetable=cron_timetable(schedule.cron), assets=condition)


def files_asset(spec: PipelineSpec, schedule: FilesSchedule, home: Path) -> Asset:
    """The DAG's own asset ``<dag_id>.new_files``, updated by a watcher of the glob (relative to the
    project directory). Its record of seen files lives under a local storage root, else under
    ``<project>/.dagspec/watch`` (the triggerer keeps it on its own disk)."""
    pattern = storage.resolve_input_path(schedule.files, home)
    root = resolve_storage_root(spec, home)
    state_root = str(home / ".dagspec" / "watch") if storage.is_uri(root) else root
    trigger = NewFilesTrigger(pattern, state_path(state_root, spec.dag_id, pattern), schedule.poll_interval)
    watcher = AssetWatcher(name=f"{spec.dag_id}.new_files", trigger=trigger)
    return Asset(name=f"{spec.dag_id}.new_files", uri=f"dagspec://{spec.dag_id}/_new_files", watchers=[watcher])


def asset_condition(schedule: AssetSchedule) -> Asset | AssetAll | AssetAny:
    """One asset as itself; several as all of them or any of them (``when``)."""
    assets = [stage_asset(*split_asset_name(name)) for name in schedule.assets]
    if len(assets) == 1:
        return assets[0]
    return AssetAny(*assets) if schedule.when == "any" else AssetAll(*assets)


def cron_timetable(cron: str) -> BaseTimetable:
    """The timetable Airflow would make of ``schedule=cron`` (``DAG._create_timetable``): runs at the
    cron's times, or per data interval under ``[scheduler] create_cron_data_intervals``. UTC, as
    every spec's start_date."""
    if conf.getboolean("scheduler", "create_cron_data_intervals"):
        return CronDataIntervalTimetable(cron, timezone="UTC")
    return CronTriggerTimetable(cron, timezone="UTC")
