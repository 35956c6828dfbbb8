"""``generate_physics_events``: events read from Parquet with ``source``, and ``dagspec generate physics``.

The CLI test is a real run in its own local Spark, replacing PATH atomically.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dagspec.errors import StageFailedError
from tests.conftest import REPO
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark


def test_cli_writes_the_seed_schema_and_replaces_the_old_output(tmp_path: Path) -> None:
    out = tmp_path / "events"
    out.mkdir()
    (out / "stale.txt").write_text("previous data")
    command = [sys.executable, "-m", "dagspec.local.cli", "generate", "physics", "--events", "40", "--seed", "3"]
    command += ["--out", str(out), "--partitions", "2", "--max-particles", "60", "--master", "local[1]"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wrote 40 events" in done.stdout
    assert not (out / "stale.txt").exists()
    assert not list(tmp_path.glob("events.__*"))  # no temporary or old directory left behind
    table = pq.read_table(out)
    assert table.column_names == ["event_id", "hfeatures", "lfeatures", "label"]
    assert sorted(table.column("event_id").to_pylist()) == list(range(40))
    assert {len(h) for h in table.column("hfeatures").to_pylist()} == {14}
    particles = table.column("lfeatures").to_pylist()
    assert max(len(p) for p in particles) <= 60
    assert np.array([q for event in particles for q in event]).shape[1] == 19


def test_cli_rejects_bad_arguments(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "dagspec.local.cli",
        "generate",
        "physics",
        "--events",
        "0",
        "--out",
        str(tmp_path / "x"),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and "events" in done.stdout
    assert not (tmp_path / "x").exists()


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
    exported = tmp_path / "storage" / "exports" / "out" / "events"
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
