"""A spec's ``schedule`` as the DAG's: a cron string or preset as is, an asset schedule as Airflow's
asset condition (``Asset``, ``AssetAll``, ``AssetAny``), with ``cron`` an ``AssetOrTimeSchedule``.

The assets are built by ``stage_asset``, the very function that names each task's outlets, so a
scheduled DAG waits for the asset objects (name and URI) the upstream DAG's tasks emit.
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetAll, AssetAny, AssetOrTimeSchedule, CronDataIntervalTimetable, CronTriggerTimetable
from airflow.sdk.bases.timetable import BaseTimetable
from airflow.sdk.configuration import conf

from dagspec.airflow.operator import stage_asset
from dagspec.spec.models import PipelineSpec
from dagspec.spec.schedule import AssetSchedule, split_asset_name

DagSchedule = str | Asset | AssetAll | AssetAny | AssetOrTimeSchedule | None


def dag_schedule(spec: PipelineSpec) -> DagSchedule:
    """The ``schedule`` argument of the spec's DAG."""
    schedule = spec.schedule
    if not isinstance(schedule, AssetSchedule):
        return schedule
    condition = asset_condition(schedule)
    if schedule.cron is None:
        return condition
    return AssetOrTimeSchedule(timetable=cron_timetable(schedule.cron), assets=condition)


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
