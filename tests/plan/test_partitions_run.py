"""Partitions run for real: day files on disk, each partition checkpointed on its own by the real
runtime in the session's Spark, readers of a window keyed by exactly the partitions they read.

The life of a daily feed: three days, then a fourth (only it runs), a rewritten old day (only it
reruns, and the window that does not hold it stays done), a deleted day (reported; the window
holding it reruns), a run limited to a range (a backfill), and a bad day that fails alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dagspec.job.partitions import run_partitions
from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from dagspec.spec.models import PipelineSpec
from tests.helpers import run_pipeline_in_process, write_spec

pytestmark = pytest.mark.integration

SPEC = """
dag_id: parts
partitions: {{files: "{days}/day_{{day}}.csv"}}
stages:
  raw: {{kind: read, partitioned: true, params: {{format: csv, header: true, schema: "x INT, y STRING", path: "{{{{ partition.path }}}}"}}}}
  doubled:
    kind: sql
    partitioned: true
    inputs: {{t: raw}}
    params: {{query: "SELECT x * 2 AS x2, y, '{{{{ partition.key }}}}' AS day FROM t"}}
  recent: {{kind: sql, inputs: {{t: {{stage: doubled, last: 2}}}}, params: {{query: "SELECT day, COUNT(*) AS n FROM t GROUP BY day"}}}}
  everything: {{kind: sql, inputs: {{t: doubled}}, params: {{query: "SELECT COUNT(*) AS n FROM t"}}}}
"""


def _day(folder: Path, day: str, rows: int, start: int = 0) -> None:
    lines = ["x,y", *(f"{start + i},r{i}" for i in range(rows))]
    (folder / f"day_{day}.csv").write_text("\n".join(lines) + "\n")


def _plan(spec: PipelineSpec, **params: Any) -> dict[str, ResolvedStage]:
    return resolve_pipeline(spec, default_context(spec, params))


def _started(stage: ResolvedStage) -> dict[str, str]:
    """partition -> when its committed checkpoint started (what ran, and when)."""
    return {
        k: json.loads(Path(p.checkpoint_dir, "manifest.json").read_text())["started"]
        for k, p in stage.partitions.items()
    }


def _rows(spark: Any, stage: ResolvedStage) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.parquet(stage.output_path("data")).collect())


def test_a_new_day_runs_only_itself_and_the_windows_follow(spark: Any, home: Path, tmp_path: Path) -> None:
    days = tmp_path / "in"
    days.mkdir()
    for i, day in enumerate(("1", "2", "10")):  # natural order: 1, 2, 10
        _day(days, day, 3 + i)
    spec = load_spec(write_spec(tmp_path / "pipelines", SPEC.format(days=days)))
    plan = run_pipeline_in_process(spark, spec)
    assert list(plan["raw"].partitions) == ["1", "2", "10"]
    assert all(stage_status(s).done for s in plan.values())
    assert _rows(spark, plan["recent"]) == [("10", 5), ("2", 4)]  # the newest two days
    assert _rows(spark, plan["everything"]) == [(12,)]
    first_recent = plan["recent"].fingerprint
    before = {name: _started(plan[name]) for name in ("raw", "doubled")}

    _day(days, "11", 7)  # a new day: only its partitions compute; both readers rerun
    plan = _plan(spec)
    assert stage_status(plan["raw"]).reasons[0] == "partitions: 3 done, 1 missing, 0 stale"
    assert not stage_status(plan["recent"]).done and not stage_status(plan["everything"]).done
    plan = run_pipeline_in_process(spark, spec)
    for name in ("raw", "doubled"):
        after = _started(plan[name])
        assert {k: after[k] for k in before[name]} == before[name]  # the old days did not run again
    assert _rows(spark, plan["recent"]) == [("10", 5), ("11", 7)]
    assert _rows(spark, plan["everything"]) == [(19,)]
    recent = plan["recent"].fingerprint

    _day(days, "1", 3, start=100)  # day 1 rewritten: it reruns; the two-day window does not hold it
    plan = _plan(spec)
    status = stage_status(plan["raw"])
    assert status.reasons[0] == "partitions: 3 done, 0 missing, 1 stale"
    assert status.reasons[1].startswith("1: input data changed")
    assert plan["recent"].fingerprint == recent and not stage_status(plan["everything"]).done
    plan = run_pipeline_in_process(spark, spec)
    assert stage_status(plan["recent"]).done and plan["recent"].fingerprint == recent

    (days / "day_11.csv").unlink()  # a day deleted: reported; the windows read the days there are now
    plan = _plan(spec)
    assert "deleted (no longer listed, kept until `dagspec gc`): 11" in stage_status(plan["raw"]).reasons[0]
    assert [p.partition for p in plan["recent"].inputs["t"].parts] == ["2", "10"]
    # the same two days as the first run's window, unchanged since: its checkpoint is the answer
    assert stage_status(plan["recent"]).done and plan["recent"].fingerprint == first_recent
    assert not stage_status(plan["everything"]).done
    plan = run_pipeline_in_process(spark, spec)
    assert _rows(spark, plan["everything"]) == [(12,)]


def test_a_run_limited_to_a_range_computes_exactly_its_missing_partitions(
    spark: Any, home: Path, tmp_path: Path
) -> None:
    days = tmp_path / "in"
    days.mkdir()
    for day in ("01", "02", "03", "04", "05"):
        _day(days, day, 2)
    spec = load_spec(write_spec(tmp_path / "pipelines", SPEC.format(days=days)))
    plan = _plan(spec, partitions="02..03")
    assert list(plan["raw"].partitions) == ["02", "03"] and plan["raw"].skipped == ["01", "04", "05"]
    for name in ("raw", "doubled"):
        run_partitions(spark, _plan(spec, partitions="02..03")[name], force=False, report=_raise, parallel=2)

    plan = _plan(spec, partitions="..04")  # 01 and 04 are missing in the range: exactly they run
    assert [k for k, p in plan["raw"].partitions.items() if not stage_status(p).done] == ["01", "04"]
    assert plan["raw"].skipped == ["05"]
    # outside a range, every listed day is the run's: the readers read the four committed days
    # once 05 is computed too
    assert [p.partition for p in _plan(spec)["everything"].inputs["t"].parts] == ["01", "02", "03", "04", "05"]


def test_a_bad_day_fails_alone_and_the_others_commit(spark: Any, home: Path, tmp_path: Path) -> None:
    days = tmp_path / "in"
    days.mkdir()
    _day(days, "1", 3)
    (days / "day_2.csv").write_text("x,y\nnot a number,r\nalso not,r\n")  # every row rejected
    _day(days, "3", 3)
    spec = load_spec(write_spec(tmp_path / "pipelines", SPEC.format(days=days)))
    failed: list[str] = []
    code = run_partitions(
        spark, _plan(spec)["raw"], force=False, report=lambda part, exc: failed.append(part.partition), parallel=2
    )
    raw = _plan(spec)["raw"]
    assert code == 1 and failed == ["2"]
    assert {k: stage_status(p).done for k, p in raw.partitions.items()} == {"1": True, "2": False, "3": True}
    assert not stage_status(raw).done


def _raise(part: ResolvedStage, exc: Exception) -> None:
    raise exc


def test_a_run_with_an_airflow_partition_key_stands_for_it_and_the_partitions_before(
    home: Path, tmp_path: Path
) -> None:
    spec = load_spec(
        write_spec(
            tmp_path / "pipelines",
            """
            dag_id: keyed
            partitions: {values: [d1, d2, d10]}
            stages:
              raw: {kind: read, partitioned: true, params: {format: csv, path: "in/{{ partition.key }}.csv"}}
              recent: {kind: sql, inputs: {t: {stage: raw, last: 2}}, params: {query: "SELECT COUNT(*) AS n FROM t"}}
            """,
        )
    )
    context = {**default_context(spec), "partition_key": "d2"}
    plan = resolve_pipeline(spec, context)
    assert list(plan["raw"].partitions) == ["d1", "d2"] and plan["raw"].skipped == ["d10"]
    assert [p.partition for p in plan["recent"].inputs["t"].parts] == ["d1", "d2"]
    assert [p.partition for p in resolve_pipeline(spec, default_context(spec))["recent"].inputs["t"].parts] == [
        "d2",
        "d10",
    ]
