"""Two specs for real (Spark): the reader reads the rows the upstream spec committed, stays done
while they are the same and reruns when the upstream commits other rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.helpers import parquet_table, run_pipeline_in_process, write_spec

pytestmark = pytest.mark.spark

INGEST = """
dag_id: ingest
stages:
  raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
  few: {{kind: sample, inputs: {{data: raw}}, params: {{n: {n}, seed: 1}}}}
"""
WEEKLY = """
dag_id: weekly
stages:
  head: {kind: sample, inputs: {data: {spec: ingest, output: few.data}}, params: {n: 3, seed: 2}}
"""


def test_a_reader_reads_the_upstream_specs_rows_and_reruns_when_they_change(spark, home, tmp_path: Path) -> None:
    data = parquet_table(spark, tmp_path, 40)
    ingest = load_spec(write_spec(tmp_path / "p", INGEST.format(data=data, n=10), "ingest.yaml"))
    weekly = load_spec(write_spec(tmp_path / "p", WEEKLY, "weekly.yaml"))
    upstream = run_pipeline_in_process(spark, ingest)
    first = run_pipeline_in_process(spark, weekly)["head"]
    rows = {tuple(r) for r in spark.read.parquet(first.output_path("data")).collect()}
    upstream_rows = {tuple(r) for r in spark.read.parquet(upstream["few"].output_path("data")).collect()}
    assert len(rows) == 3 and rows <= upstream_rows
    assert first.checkpoint.manifest()["inputs"]["data"]["path"] == upstream["few"].output_path("data")  # type: ignore[index]

    again = resolve_pipeline(weekly, default_context(weekly))["head"]
    assert again.fingerprint == first.fingerprint and stage_status(again).done

    ingest = load_spec(write_spec(tmp_path / "p", INGEST.format(data=data, n=12), "ingest.yaml"))
    run_pipeline_in_process(spark, ingest)  # other rows committed: _LATEST names them
    changed = resolve_pipeline(weekly, default_context(weekly))["head"]
    assert changed.fingerprint != first.fingerprint
    assert stage_status(changed).reasons == ["upstream spec changed: ingest.few (input data)"]
