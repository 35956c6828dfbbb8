"""The topology classifier's `source` param: generated events, or events read from Parquet."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import StageFailedError
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark


def test_events_come_from_parquet_when_a_source_is_given(spark, home, tmp_path: Path) -> None:
    generated = write_spec(
        tmp_path / "a",
        """
        stages:
          events: {kind: generate_physics_events, params: {events: 120, seed: 3, max_particles: 20}}
          out: {kind: export, inputs: {data: events}, params: {path: out/events}}
        """,
    )
    load_and_run(spark, generated)
    exported = tmp_path / "storage" / "out" / "events"
    reread = write_spec(
        tmp_path / "b",
        f"""
        stages:
          events: {{kind: generate_physics_events, params: {{events: 1, source: "{exported}"}}}}
        """,
    )
    plan = load_and_run(spark, reread)
    assert manifest(plan["events"])["rows"] == {"data": 120}
    assert manifest(plan["events"])["metrics"]["source"] == str(exported)

    spark.range(3).write.parquet(str(tmp_path / "plain"))
    wrong = write_spec(
        tmp_path / "c",
        f"""
        stages:
          events: {{kind: generate_physics_events, params: {{events: 1, source: "{tmp_path / "plain"}"}}}}
        """,
    )
    with pytest.raises(StageFailedError, match="lacks the seed schema's columns"):
        load_and_run(spark, wrong)
