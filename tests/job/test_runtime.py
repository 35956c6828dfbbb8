"""Running stages through the real runner: hits, exports that cannot lie, broken checkpoints, killed commits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagspec.errors import StageFailedError, StorageError
from dagspec.job.runtime import run_stage
from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import parquet_table, run_pipeline_in_process, write_spec

pytestmark = pytest.mark.spark

SPEC = """
params:
  n: {{type: integer, default: 5}}
stages:
  raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
  few: {{kind: sample, inputs: {{data: raw}}, params: {{n: "{{{{ params.n }}}}", seed: 1}}}}
  out: {{kind: export, inputs: {{data: few}}, params: {{path: m/few}}}}
"""


@pytest.fixture
def spec(spark, home, tmp_path: Path):
    data = parquet_table(spark, tmp_path, 40)
    return load_spec(write_spec(tmp_path / "p", SPEC.format(data=data)))


def test_an_export_always_holds_the_last_runs_rows(spark, spec, tmp_path: Path) -> None:
    exported = tmp_path / "storage" / "exports" / "m" / "few"
    for n in (5, 8, 5):
        plan = run_pipeline_in_process(spark, spec, {"n": n})
        assert spark.read.parquet(str(exported)).count() == n
    # the third run found every checkpoint of n=5 committed, yet published again
    assert stage_status(plan["few"]).done and stage_status(plan["out"]).done


def test_a_hit_whose_export_was_overwritten_says_why(spark, spec) -> None:
    five = run_pipeline_in_process(spark, spec, {"n": 5})
    run_pipeline_in_process(spark, spec, {"n": 8})
    status = stage_status(five["out"])
    assert not status.done
    # not broken: the export is what another run with other params published, and this run publishes again
    assert status.reasons == [
        f"published by another run (params: n=8): {five['out'].publish_path} holds fingerprint {resolve(spec, 8)}"
    ]


def resolve(spec, n: int) -> str:
    return resolve_pipeline(spec, default_context(spec, {"n": n}))["out"].fingerprint


def test_a_deleted_output_folder_is_broken_and_recomputed(spark, spec) -> None:
    plan = run_pipeline_in_process(spark, spec)
    shutil.rmtree(plan["few"].output_path("data"))
    status = stage_status(plan["few"])
    assert status.state == "missing" and status.reasons[0].startswith("broken: output folder")
    with pytest.raises(StorageError, match="stage 'out', input 'data' \\(few\\): its input checkpoint is not usable"):
        run_stage(spark, plan["out"], force=True)
    assert run_stage(spark, plan["few"]).outcome == "committed"
    assert stage_status(plan["few"]).done


def test_source_files_changed_after_planning_fail_the_stage(spark, home, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("x\n1\n")
    spec = load_spec(
        write_spec(
            tmp_path / "p",
            f'stages:\n  raw: {{kind: read, params: {{format: csv, path: "{tmp_path}/in", header: true}}}}\n',
        )
    )
    plan = resolve_pipeline(spec, default_context(spec))
    (tmp_path / "in" / "a.csv").write_text("x\n1\n2\n")
    with pytest.raises(StageFailedError, match=r"input files changed after planning: .*a\.csv"):
        run_stage(spark, plan["raw"])


KILL_AT_SUCCESS = """
import os, signal, sys
from dagspec import storage
from dagspec.plan.resolve import ResolvedStage
from dagspec.job.runtime import run_stage
from dagspec.job.session import create_session
write_text = storage.write_text
def dying_write(path, text):
    if path.endswith("/_SUCCESS"):
        os.kill(os.getpid(), signal.SIGKILL)  # after the rename into place, before the marker
    write_text(path, text)
storage.write_text = dying_write
spark = create_session("killed-commit", master="local[1]")
run_stage(spark, ResolvedStage.from_json(sys.argv[1]))
"""


def test_sigkill_during_commit_leaves_a_broken_checkpoint_that_the_rerun_replaces(spark, spec) -> None:
    run_stage(spark, resolve_pipeline(spec, default_context(spec))["raw"])
    plan = resolve_pipeline(spec, default_context(spec))  # now keyed on raw's committed content
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", KILL_AT_SUCCESS, plan["few"].to_json()], env=env, capture_output=True, timeout=300
    )
    assert done.returncode == -9, done.stderr[-2000:]
    few = plan["few"]
    assert Path(few.checkpoint_dir, "data").is_dir() and not Path(few.success_path).exists()
    assert Path(few.checkpoint.lease_path).exists()  # the dead attempt's lease
    assert stage_status(few).reasons[0].startswith("broken: ")

    assert run_stage(spark, few).outcome == "committed"  # the dead owner's lease is taken over at once
    assert stage_status(few).done and spark.read.parquet(few.output_path("data")).count() == 5
    leftovers = [p.name for p in Path(few.stage_dir).iterdir() if p.name not in (few.fingerprint, "_LATEST")]
    assert leftovers == []


def test_a_table_passed_through_unchanged_is_linked_not_rewritten(spark, home, tmp_path: Path) -> None:
    data = parquet_table(spark, tmp_path, 40)
    checked = load_spec(
        write_spec(
            tmp_path / "c",
            f"""
stages:
  raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
  checked: {{kind: check, inputs: {{data: raw}}, params: {{rows: {{min: 40}}}}}}
""",
        )
    )
    plan = run_pipeline_in_process(spark, checked, {})
    raw_files = sorted((Path(plan["raw"].checkpoint_dir) / "data").glob("*.parquet"))
    checked_files = sorted((Path(plan["checked"].checkpoint_dir) / "data").glob("*.parquet"))
    assert [f.name for f in checked_files] == [f.name for f in raw_files] and raw_files
    assert all(c.stat().st_ino == r.stat().st_ino for c, r in zip(checked_files, raw_files, strict=True))
    manifest = stage_status(plan["checked"]).done and plan["checked"].checkpoint.manifest()
    assert manifest and manifest["rows"] == {"data": 40}
    shutil.rmtree(plan["raw"].checkpoint_dir)  # the check's copy stands on its own
    assert spark.read.parquet(str(Path(plan["checked"].checkpoint_dir) / "data")).count() == 40


def test_a_stage_releases_its_caches_once_its_outputs_are_written(
    spark, home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the Connect server is shared and long-lived: a cache a stage leaves behind stays in its heap
    from dagspec.kinds.base import StageContext

    made = []
    persist = StageContext.persist
    monkeypatch.setattr(StageContext, "persist", lambda self, df: made.append(persist(self, df)) or made[-1])
    (tmp_path / "rows.csv").write_text("a,b\n" + "".join(f"{i},x{i}\n" for i in range(30)) + "oops\n")
    spec = load_spec(
        write_spec(
            tmp_path / "r",
            f"""
stages:
  raw: {{kind: read, params: {{format: csv, path: "{tmp_path / "rows.csv"}", schema: "a INT, b STRING",
         max_rejected_fraction: 0.5}}}}
  few: {{kind: sample, inputs: {{data: raw}}, params: {{sizes: [5, 10], seed: 1}}}}
""",
        )
    )
    plan = run_pipeline_in_process(spark, spec, {})
    assert spark.read.parquet(plan["few"].output_path("n10")).count() == 10
    assert len(made) == 2  # the read's parsed lines, the nested sample's base
    assert [df.storageLevel.useMemory or df.storageLevel.useDisk for df in made] == [False, False]


CLASSIC_CONF = """
from dagspec.job.session import create_session
spark = create_session("codegen-limit", master="local[1]")
print(spark.conf.get("spark.sql.codegen.hugeMethodLimit"))
spark.stop()
"""


def test_a_classic_stage_session_compiles_wide_projections() -> None:
    # the spark-submit path's session (a classic driver) gets the code generation limit too: with
    # Spark's default a wide projection's one generated method runs in HotSpot's interpreter (2x CPU)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CLASSIC_CONF], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "8000"
