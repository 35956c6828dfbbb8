"""``schedule: {files: GLOB}``: the trigger the triggerer runs (one event per batch of new, finished
files; never again for a seen one, a restart included), and the DAG schedule compiled from it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from airflow.sdk import Asset
from airflow.serialization.serialized_objects import DagSerialization

from dagspec.airflow.compiler import compile_folder
from dagspec.airflow.new_files import CLASSPATH, NewFilesTrigger, list_matches, read_seen, state_path
from dagspec.errors import SpecValidationError
from dagspec.spec.loader import load_spec
from dagspec.spec.schedule import FilesSchedule
from tests.conftest import REPO
from tests.helpers import write_spec

STAGES = "stages:\n  raw: {kind: read, params: {format: tsv, path: data/incoming/day_*.tsv}}\n"


def _trigger(tmp_path: Path) -> NewFilesTrigger:
    return NewFilesTrigger(str(tmp_path / "in" / "day_*.tsv"), str(tmp_path / "state.json"), poll_interval=0.01)


def _land(tmp_path: Path, name: str, text: str = "1\t2\n") -> Path:
    path = tmp_path / "in" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_new_files_make_one_event_once_they_stop_changing(tmp_path: Path) -> None:
    trigger = _trigger(tmp_path)
    first, second = _land(tmp_path, "day_00.tsv"), _land(tmp_path, "day_01.tsv")
    _land(tmp_path, "other.tsv")  # not matched
    assert trigger.poll() == []  # first look: sizes noted, nothing proven finished yet
    assert trigger.poll() == [str(first), str(second)]  # both in one batch
    assert trigger.poll() == []  # unchanged: nothing new
    assert set(read_seen(str(tmp_path / "state.json"))) == {str(first), str(second)}


def test_a_file_still_growing_is_not_picked_up_yet(tmp_path: Path) -> None:
    trigger = _trigger(tmp_path)
    growing = _land(tmp_path, "day_02.tsv", "1\t2\n")
    trigger.poll()
    with growing.open("a") as handle:
        handle.write("3\t4\n")
    assert trigger.poll() == []  # other size than at the last poll: still being written
    assert trigger.poll() == [str(growing)]


def test_a_restarted_trigger_does_not_fire_again_for_seen_files(tmp_path: Path) -> None:
    before = _trigger(tmp_path)
    seen = _land(tmp_path, "day_00.tsv")
    before.poll()
    assert before.poll() == [str(seen)]
    after = _trigger(tmp_path)  # the triggerer re-creates it from serialize()
    assert after.poll() == [] and after.poll() == []
    late = _land(tmp_path, "day_01.tsv")
    after.poll()
    assert after.poll() == [str(late)]


def test_a_rewritten_file_counts_as_new(tmp_path: Path) -> None:
    trigger = _trigger(tmp_path)
    path = _land(tmp_path, "day_00.tsv")
    trigger.poll(), trigger.poll()
    path.write_text("other rows\n")
    os.utime(path, ns=(1, 1))
    trigger.poll()
    assert trigger.poll() == [str(path)]


def test_run_yields_one_event_listing_the_batch_and_the_state_is_written_before(tmp_path: Path) -> None:
    trigger = _trigger(tmp_path)
    files = [str(_land(tmp_path, f"day_0{i}.tsv")) for i in range(3)]

    async def first_event() -> object:
        events = trigger.run()
        event = await anext(events)
        assert set(read_seen(trigger.state)) == set(files)  # recorded before the event left
        await events.aclose()
        return event

    event = asyncio.run(asyncio.wait_for(first_event(), timeout=30))
    assert event.payload == {"glob": trigger.pattern, "files": files}  # type: ignore[attr-defined]
    assert trigger.serialize() == (
        CLASSPATH,
        {"pattern": trigger.pattern, "state": trigger.state, "poll_interval": 0.01},
    )


def test_the_spec_form_and_its_checks(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, 'schedule: {files: "data/incoming/day_*.tsv"}\n' + STAGES))
    assert spec.schedule == FilesSchedule(files="data/incoming/day_*.tsv") and spec.start_date is None
    for glob, error in [
        ("s3a://bucket/day_*.tsv", "expected a local path or glob"),
        ("data/incoming/", "expected a glob of files, got the folder"),
        ("../elsewhere/*.tsv", "a '..' in the glob is not allowed"),
    ]:
        with pytest.raises(SpecValidationError, match=error):
            load_spec(write_spec(tmp_path, f'schedule: {{files: "{glob}"}}\n' + STAGES))


def test_the_dag_is_scheduled_on_its_own_asset_with_a_watcher(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, 'dag_id: daily\nschedule: {files: "data/incoming/day_*.tsv", poll_interval: 5}\n' + STAGES)
    compiled = compile_folder(folder, home=tmp_path, jobs_dir=REPO / "jobs")
    assert not compiled.errors
    asset = compiled.dags["daily"].timetable.asset_condition
    assert isinstance(asset, Asset) and (asset.name, asset.uri) == ("daily.new_files", "dagspec://daily/_new_files")
    (watcher,) = asset.watchers
    pattern = str(tmp_path / "data/incoming/day_*.tsv")
    state = state_path(str(tmp_path / ".dagspec/storage"), "daily", pattern)
    assert watcher.name == "daily.new_files"
    assert watcher.trigger.serialize() == (CLASSPATH, {"pattern": pattern, "state": state, "poll_interval": 5.0})
    stored = DagSerialization.from_dict(DagSerialization.to_dict(compiled.dags["daily"])).timetable
    assert stored.asset_condition.name == "daily.new_files"


def test_the_trigger_leaves_out_a_match_reached_through_a_symlink_out_of_the_folder(tmp_path: Path) -> None:
    watched, secret = tmp_path / "watched", tmp_path / "secret"
    watched.mkdir()
    secret.mkdir()
    (watched / "day_00.tsv").write_text("1\n")
    (secret / "day_01.tsv").write_text("2\n")
    (watched / "more").symlink_to(secret)
    assert os.path.exists(watched / "more" / "day_01.tsv")
    assert list(list_matches(f"{watched}/**/*.tsv")) == [str(watched / "day_00.tsv")]
