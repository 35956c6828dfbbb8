"""Run records (dagspec.plan.history): one folder per run on any filesystem, one shape on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.plan.history import RUNS_DIR, RecordError, StageRecord, read_run, run_dir, run_folder_name


def _record(run_id: str, root: Path, **changes: object) -> StageRecord:
    fields: dict[str, object] = {
        "dag_id": "d", "run_id": run_id, "stage": "raw", "kind": "read", "fingerprint": "f1", "outcome": "ran",
        "stage_dir": f"{root}/d/raw", "checkpoint": f"{root}/d/raw/f1", "committed_by": run_id,
        "recorded": "2026-12-04T00:00:00+00:00", "rows": {"data": 3}, "metrics": {"rows_rejected": 0},
    }  # fmt: skip
    return StageRecord.model_validate({**fields, **changes})


def test_a_run_id_is_one_folder_name_without_colons_plus_or_dots() -> None:
    name = run_folder_name("manual__2026-12-04T22:41:04.123+00:00")
    assert name == "manual__2026-12-04T22%3A41%3A04%2E123%2B00%3A00"
    assert run_folder_name("..") == "%2E%2E" and "/" not in run_folder_name("a/../b")
    assert run_dir("/r/", "d", "x:1") == f"/r/d/{RUNS_DIR}/x%3A1"


def test_records_are_read_back_as_written(tmp_path: Path) -> None:
    record = _record("manual__1", tmp_path)
    folder = Path(run_dir(str(tmp_path), "d", "manual__1"))
    folder.mkdir(parents=True)
    (folder / "raw.json").write_text(record.model_dump_json())
    assert read_run(str(tmp_path), "d", "manual__1") == {"raw": record}
    assert read_run(str(tmp_path), "d", "manual__2") == {}  # a run that recorded nothing


def test_a_record_of_another_version_or_run_is_refused_by_name(tmp_path: Path) -> None:
    folder = Path(run_dir(str(tmp_path), "d", "manual__1"))
    folder.mkdir(parents=True)
    (folder / "raw.json").write_text(
        _record("manual__1", tmp_path).model_dump_json().replace('"version":1', '"version":2')
    )
    with pytest.raises(RecordError, match=r"raw\.json: not a dagspec run record \(version 1\): version: "):
        read_run(str(tmp_path), "d", "manual__1")
    (folder / "raw.json").write_text(_record("manual__9", tmp_path).model_dump_json())
    with pytest.raises(RecordError, match="records run 'manual__9' of d, not 'manual__1'"):
        read_run(str(tmp_path), "d", "manual__1")
