"""``dagspec generate physics``: a real CLI run in its own local Spark, replacing PATH atomically."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.spark


def test_cli_writes_the_seed_schema_and_replaces_the_old_output(tmp_path: Path) -> None:
    out = tmp_path / "events"
    out.mkdir()
    (out / "stale.txt").write_text("previous data")
    command = [sys.executable, "-m", "dagspec.cli", "generate", "physics", "--events", "40", "--seed", "3"]
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
        "dagspec.cli",
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
