"""Early cutoff: a reader's key holds its upstream outputs' content, so an upstream recomputed to the
same bytes leaves its readers done, and different bytes rerun them (real Spark, real commits)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagspec import digest
from dagspec.errors import DagspecError, StageFailedError
from dagspec.job.runtime import run_stage
from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.helpers import parquet_table, run_pipeline_in_process, write_spec

pytestmark = pytest.mark.spark

SPEC = """
stages:
  raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
  few: {{kind: sample, inputs: {{data: raw}}, params: {{n: 5, seed: 1}}}}
"""


@pytest.fixture
def chain(spark, home, tmp_path: Path):
    data = parquet_table(spark, tmp_path, 40)
    return load_spec(write_spec(tmp_path / "p", SPEC.format(data=data))), data


def test_two_writes_of_the_same_rows_have_one_digest_and_other_rows_another(spark, tmp_path: Path) -> None:
    df = spark.range(100).selectExpr("id", "id * 2 AS twice").repartition(3, "id")
    df.write.parquet(str(tmp_path / "a"))
    df.write.parquet(str(tmp_path / "b"))
    spark.range(101).selectExpr("id", "id * 2 AS twice").repartition(3, "id").write.parquet(str(tmp_path / "c"))
    names_a = sorted(p.name for p in (tmp_path / "a").glob("part-*"))
    names_b = sorted(p.name for p in (tmp_path / "b").glob("part-*"))
    assert names_a != names_b  # Spark's part files carry a random job UUID...
    assert digest.tree_digest(str(tmp_path / "a")) == digest.tree_digest(str(tmp_path / "b"))  # ...left out
    assert digest.tree_digest(str(tmp_path / "a")) != digest.tree_digest(str(tmp_path / "c"))
    (tmp_path / "b" / "notes.txt").write_text("x")  # any extra file counts
    assert digest.tree_digest(str(tmp_path / "a")) != digest.tree_digest(str(tmp_path / "b"))


WRITE_IN_ANOTHER_JVM = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.range(100).selectExpr("id", "id * 2 AS twice", "id % 3 AS label").repartition(2, "id").write.parquet(sys.argv[1])
"""


def test_the_same_rows_written_by_two_jvms_have_one_digest(spark, tmp_path: Path) -> None:
    # parquet-mr orders a footer's encodings lists by JVM identity hashes: other bytes, same data
    spark.range(100).selectExpr("id", "id * 2 AS twice", "id % 3 AS label").repartition(2, "id").write.parquet(
        str(tmp_path / "here")
    )
    subprocess.run([sys.executable, "-c", WRITE_IN_ANOTHER_JVM, str(tmp_path / "there")], check=True, timeout=300)
    assert digest.tree_digest(str(tmp_path / "here")) == digest.tree_digest(str(tmp_path / "there"))
    first = sorted((tmp_path / "here").glob("part-*.parquet"))[0]
    assert digest.tree_digest(str(first)) != digest.tree_digest(str(tmp_path / "here"))
    damaged = tmp_path / "damaged" / first.name
    damaged.parent.mkdir()
    data = bytearray(first.read_bytes())
    data[4] ^= 0xFF  # a byte of the first data page: the footer still parses
    damaged.write_bytes(bytes(data))
    assert digest.tree_digest(str(damaged)) != digest.tree_digest(str(first))


def test_an_upstream_recomputed_to_the_same_bytes_leaves_its_reader_done(spark, chain) -> None:
    spec, _ = chain
    plan = run_pipeline_in_process(spark, spec)
    few_manifest = plan["few"].checkpoint.manifest()
    assert few_manifest is not None and plan["raw"].checkpoint.content("data")
    assert plan["few"].key["upstream"]["data"] == f"raw.data#{plan['raw'].checkpoint.content('data')}"

    shutil.rmtree(plan["raw"].checkpoint_dir)  # a forced rerun of raw alone
    before = resolve_pipeline(spec, default_context(spec))
    assert before["few"].pending == ["raw"]
    waiting = stage_status(before["few"])
    assert not waiting.done and waiting.reasons[0].startswith("upstream not committed yet: raw")
    with pytest.raises(DagspecError, match="planned before its upstream raw committed"):
        run_stage(spark, before["few"])

    assert run_stage(spark, before["raw"]).outcome == "committed"
    after = resolve_pipeline(spec, default_context(spec))
    assert after["few"].fingerprint == plan["few"].fingerprint and not after["few"].pending
    status = stage_status(after["few"])
    assert status.done
    assert status.reasons == ["upstream recomputed, same content: reused (raw, input data)"]
    assert run_stage(spark, after["few"]).outcome == "hit"
    assert after["few"].checkpoint.manifest() == few_manifest  # not rewritten


def test_a_touched_but_unchanged_input_file_reruns_the_source_only(spark, chain) -> None:
    spec, data = chain
    plan = run_pipeline_in_process(spark, spec)
    for part in Path(data).glob("*.parquet"):
        os.utime(part, ns=(part.stat().st_atime_ns, part.stat().st_mtime_ns + 10**9))
    touched = resolve_pipeline(spec, default_context(spec))
    assert touched["raw"].fingerprint != plan["raw"].fingerprint
    assert stage_status(touched["raw"]).reasons[0].startswith("input data changed")
    run_stage(spark, touched["raw"])
    after = resolve_pipeline(spec, default_context(spec))
    assert after["few"].fingerprint == plan["few"].fingerprint
    assert stage_status(after["few"]).reasons == ["upstream recomputed, same content: reused (raw, input data)"]


def test_other_upstream_content_reruns_the_reader(spark, chain, tmp_path: Path) -> None:
    spec, data = chain
    plan = run_pipeline_in_process(spark, spec)
    spark.range(7).selectExpr("id", "0 AS label").write.mode("append").parquet(str(data))
    changed = run_pipeline_in_process(spark, spec)
    assert changed["raw"].checkpoint.content("data") != plan["raw"].checkpoint.content("data")
    assert changed["few"].fingerprint != plan["few"].fingerprint
    assert stage_status(changed["few"]).done and stage_status(plan["few"]).done  # both committed, each its own


def test_a_reader_refuses_an_input_replaced_with_other_content_after_planning(spark, chain) -> None:
    spec, _ = chain
    plan = run_pipeline_in_process(spark, spec)
    shutil.rmtree(plan["few"].checkpoint_dir)
    planned = resolve_pipeline(spec, default_context(spec))  # few keyed on raw's content now
    # raw is recomputed meanwhile (a forced run) and, nondeterministic, commits other bytes
    raw = planned["raw"].checkpoint
    work = raw.new_attempt_dir("other")
    spark.range(3).selectExpr("id", "1 AS label").write.parquet(f"{work}/data")
    assert raw.commit(work, {**(raw.manifest() or {}), "outputs": {"data": {"type": "table"}}}, replace=True)
    assert raw.content("data") != planned["few"].inputs["data"].content
    with pytest.raises(StageFailedError, match="was recomputed with other content after this stage was planned"):
        run_stage(spark, planned["few"])
