"""A stage reading another spec's output: its key holds the upstream's last committed checkpoint,
so it reruns exactly when the upstream commits other content; a missing upstream names the spec
to run first. Upstream checkpoints are real commits (``Checkpoint.commit``) of small files."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.exceptions import AirflowException

from dagspec import checkpoint
from dagspec.checkpoint import Checkpoint
from dagspec.plan.reasons import key_changes, stage_status
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.helpers import write_spec

READER = """
dag_id: weekly
stages:
  head:
    kind: sample
    inputs: {data: {spec: ctr_ingest, output: features.test}}
    params: {n: 10}
  more: {kind: sample, inputs: {data: head}, params: {n: 5}}
"""


def _commit(root: Path, fingerprint: str, rows: str) -> Checkpoint:
    """Commit ctr_ingest.features at ``fingerprint`` with output ``test`` holding ``rows``."""
    stage_dir = f"{root}/ctr_ingest/features"
    found = Checkpoint(stage_dir, fingerprint)
    work_dir = found.new_attempt_dir("a1")
    Path(work_dir, "test").mkdir()
    Path(work_dir, "test", "part-0.parquet").write_text(rows)
    manifest = {"fingerprint": fingerprint, "outputs": {"test": {"type": "table"}}, "finished": fingerprint}
    assert found.commit(work_dir, manifest)
    return found


def _plan(tmp_path: Path) -> dict[str, ResolvedStage]:
    spec = load_spec(write_spec(tmp_path / "pipelines", READER, "weekly.yaml"))
    return resolve_pipeline(spec, default_context(spec), home=tmp_path, storage_root=str(tmp_path / "store"))


def _record(stage: ResolvedStage) -> None:
    """Commit the reader's checkpoint as a run would (its manifest holds its key)."""
    work_dir = stage.checkpoint.new_attempt_dir("r1")
    Path(work_dir, "data").mkdir()
    manifest = {"fingerprint": stage.fingerprint, "key": stage.key, "outputs": {"data": {"type": "table"}}}
    stage.checkpoint.commit(work_dir, manifest)


def test_a_commit_points_latest_at_it_and_the_reader_reads_that_checkpoint(tmp_path: Path) -> None:
    first = _commit(tmp_path / "store", "f1", "rows v1")
    assert checkpoint.latest(first.stage_dir) == first
    head = _plan(tmp_path)["head"]
    data = head.inputs["data"]
    assert (data.spec, data.stage, data.output, data.fingerprint) == ("ctr_ingest", "features", "test", "f1")
    assert data.path == first.output_path("test") and head.blocked == []
    assert head.key["upstream_specs"] == {"data": f"ctr_ingest:features.test#{first.content('test')}"}
    assert "upstream_specs" not in _plan(tmp_path)["more"].key  # a stage reading no other spec: key as before


def test_the_key_changes_exactly_when_the_upstream_commits_other_content(tmp_path: Path) -> None:
    _commit(tmp_path / "store", "f1", "rows v1")
    before = _plan(tmp_path)["head"]
    _record(before)
    assert stage_status(before).done

    _commit(tmp_path / "store", "f2", "rows v1")  # recomputed (other params, code...) to the same bytes
    same = _plan(tmp_path)["head"]
    assert same.fingerprint == before.fingerprint and same.inputs["data"].fingerprint == "f2"
    assert stage_status(same).done
    assert stage_status(same).reasons == ["upstream recomputed, same content: reused (ctr_ingest.features, input data)"]

    _commit(tmp_path / "store", "f3", "rows v2")  # other content
    after = _plan(tmp_path)["head"]
    assert after.fingerprint != before.fingerprint
    assert stage_status(after).reasons == ["upstream spec changed: ctr_ingest.features (input data)"]
    assert key_changes(before.key, after.key) == ["upstream spec changed: ctr_ingest.features (input data)"]


def test_a_hit_of_an_older_checkpoint_points_latest_back_at_it(tmp_path: Path) -> None:
    first = _commit(tmp_path / "store", "f1", "rows v1")
    second = _commit(tmp_path / "store", "f2", "rows v2")
    assert checkpoint.latest(first.stage_dir) == second
    first.point_latest()  # what the operator does on a hit: that run's output is what readers get
    assert _plan(tmp_path)["head"].inputs["data"].fingerprint == "f1"


def test_a_missing_upstream_blocks_the_stage_naming_the_spec_to_run_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_spec(tmp_path / "pipelines", "dag_id: ctr_ingest\nstages: {}\n", "ingest.yaml")  # named apart from its file
    head = _plan(tmp_path)["head"]
    assert "data" not in head.inputs
    assert head.blocked == [
        "input 'data' reads ctr_ingest.features.test, but spec 'ctr_ingest' has no committed checkpoint of "
        f"stage 'features' under {tmp_path / 'store'}: run spec 'ctr_ingest' first (`dagspec run pipelines/ingest.yaml`)"
    ]
    (tmp_path / "pipelines" / "ingest.yaml").unlink()  # not in the folder: no command to suggest
    assert _plan(tmp_path)["head"].blocked[0].endswith("run spec 'ctr_ingest' first")
    status = stage_status(head)
    assert not status.done and status.reasons[0].startswith("upstream spec not committed: input 'data' reads")


def test_a_latest_pointing_at_a_broken_checkpoint_blocks_too(tmp_path: Path) -> None:
    first = _commit(tmp_path / "store", "f1", "rows v1")
    Path(first.success_path).unlink()
    assert "run spec 'ctr_ingest' first" in _plan(tmp_path)["head"].blocked[0]


def test_the_operator_fails_a_blocked_stage_with_that_message(tmp_path: Path) -> None:
    from dagspec.airflow.operator import DagspecStageOperator

    spec = load_spec(write_spec(tmp_path / "pipelines", READER, "weekly.yaml"))
    task = DagspecStageOperator(
        task_id="head", spec=spec, stage_name="head", home=str(tmp_path), jobs_dir=str(tmp_path)
    )
    context = {"params": {"force": False}}
    with pytest.MonkeyPatch.context() as patch:  # the task's own resolve needs a whole Airflow context
        patch.setattr(type(task), "resolve", lambda self, ctx: _plan(tmp_path)["head"])
        with pytest.raises(AirflowException, match=r"stage 'head': input 'data' reads .* run spec 'ctr_ingest' first"):
            task.execute(context)


def test_gc_keeps_the_checkpoint_latest_names(tmp_path: Path) -> None:
    from dagspec.local.gc import plan_removals

    _commit(tmp_path / "store", "f1", "rows v1")
    _commit(tmp_path / "store", "f2", "rows v2")
    removed = plan_removals(str(tmp_path / "store"), {}, set(), keep=0)
    assert [Path(r.path).name for r in removed] == ["f1"]  # f2, the one other specs read, stays
