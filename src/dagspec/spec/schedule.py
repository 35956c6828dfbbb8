"""A spec's ``schedule``: a cron string, a preset, null, or the outputs of other specs.

Every stage output is an Airflow asset named ``<dag_id>.<stage>.<output>`` (the task's outlet);
``schedule: {assets: [...]}`` runs the DAG when those assets update: all of them (``when: all``,
the default), any of them (``when: any``), or, with ``cron``, also at the cron's times (Airflow's
``AssetOrTimeSchedule``). Whether the names exist is checked against the other specs of the
folder (``dagspec.spec.asset_links``); the Airflow objects are built by ``dagspec.airflow.schedule``.
``schedule: {files: GLOB}`` runs the DAG once per batch of new files matching a local glob (an
``AssetWatcher`` the triggerer runs, ``dagspec.airflow.new_files``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from dagspec.spec.roots import check_watch_glob

SCHEDULE_PRESETS = {"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly"}
# the presets that are a cron expression (croniter's aliases); @once and @continuous are not
CRON_PRESETS = SCHEDULE_PRESETS - {"@once", "@continuous"}
# an asset: dag_id (letters, digits, _ . -), then stage and output names (no dots)
ASSET_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$"
# pydantic puts a tagged union's tag into an error's location; the loader drops parts with this prefix
UNION_TAG_PREFIX = "tag-"
_CRON_TAG = f"{UNION_TAG_PREFIX}cron"
_ASSETS_TAG = f"{UNION_TAG_PREFIX}assets"
_FILES_TAG = f"{UNION_TAG_PREFIX}files"


def check_cron(value: str, *, allowed: set[str], also: str = "") -> str:
    """``value`` if it is one of ``allowed`` or a valid cron expression, else a ValueError (naming
    ``also``, the other forms the field takes)."""
    if value in allowed:
        return value
    from croniter import croniter  # an Airflow dependency, pure Python

    if not croniter.is_valid(value):
        raise ValueError(f"expected a cron expression, one of {sorted(allowed)}{also}, got {value!r}")
    return value


def split_asset_name(name: str) -> tuple[str, str, str]:
    """``"ctr_ingest.features.data"`` -> ``("ctr_ingest", "features", "data")`` (a dag_id may hold dots)."""
    dag_id, stage, output = name.rsplit(".", 2)
    return dag_id, stage, output


def _is_asset_name(name: str) -> str:
    if not re.match(ASSET_NAME_PATTERN, name):
        raise ValueError(f"expected '<dag_id>.<stage>.<output>' (a stage output of another spec), got {name!r}")
    return name


AssetName = Annotated[str, AfterValidator(_is_asset_name)]


class AssetSchedule(BaseModel):
    """Run when other specs' stage outputs update (and, with ``cron``, also at the cron's times)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    assets: list[AssetName] = Field(
        min_length=1,
        description="stage outputs of other specs, each '<dag_id>.<stage>.<output>' (the asset its task emits)",
        json_schema_extra={"items": {"type": "string", "pattern": ASSET_NAME_PATTERN}},
    )
    when: Literal["all", "any"] = Field(
        default="all", description="all: run once every listed asset has updated since the last run; any: on each"
    )
    cron: str | None = Field(
        default=None,
        description="also run at these times: a cron expression or a preset (@hourly ... @yearly); needs start_date",
    )

    @field_validator("assets")
    @classmethod
    def _names_are_distinct(cls, assets: list[str]) -> list[str]:
        repeated = sorted({name for name in assets if assets.count(name) > 1})
        if repeated:
            raise ValueError(f"listed more than once: {', '.join(repeated)}")
        return assets

    @field_validator("cron")
    @classmethod
    def _cron_is_periodic(cls, cron: str | None) -> str | None:
        return None if cron is None else check_cron(cron, allowed=CRON_PRESETS)


class FilesSchedule(BaseModel):
    """Run once per batch of new files matching a glob (a file is new until a run was queued for it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: str = Field(
        min_length=1,
        description="a glob of local files, relative to the project directory or absolute (data/incoming/day_*.tsv), "
        "under the project or a watch root of the deployment; each poll that finds new, no longer growing files "
        "queues one run",
    )
    poll_interval: float = Field(default=30, ge=1, le=3600, description="seconds between two looks at the folder")

    @field_validator("files")
    @classmethod
    def _files_is_a_local_glob(cls, files: str) -> str:
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", files):
            raise ValueError(f"expected a local path or glob (the triggerer lists it on its own disk), got {files!r}")
        if files.endswith("/"):
            raise ValueError(f"expected a glob of files, got the folder {files!r}: add a pattern, e.g. {files}*")
        if ".." in files.split("/"):
            raise ValueError(f"a '..' in the glob is not allowed: write it from the project directory, got {files!r}")
        return check_watch_glob(files)  # dagspec.spec.roots: the project or a watch root of the deployment


def _schedule_form(value: Any) -> str:
    if isinstance(value, FilesSchedule) or (isinstance(value, dict) and "files" in value):
        return _FILES_TAG
    return _ASSETS_TAG if isinstance(value, dict | AssetSchedule) else _CRON_TAG


Schedule = Annotated[
    Annotated[str, Tag(_CRON_TAG)]
    | Annotated[AssetSchedule, Tag(_ASSETS_TAG)]
    | Annotated[FilesSchedule, Tag(_FILES_TAG)],
    Discriminator(_schedule_form),
]
