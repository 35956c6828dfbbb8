"""Two `dagspec run` of one spec at once, on a fresh storage root."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dagspec.checkpoint import LATEST
from tests.conftest import CRITEO_SAMPLE, REPO
from tests.helpers import DAGSPEC, cli_env, write_spec

pytestmark = pytest.mark.integration


# A source, a shuffle and a publishing export: each kind of commit the two runs race for.
SPEC = """\
dag_id: race
default_args: {retries: 0}
stages:
  raw: {kind: read, params: {format: tsv, path: "%s", schema: criteo}}
  balanced: {kind: undersample, inputs: {data: raw}, params: {label_col: label, seed: 42}}
  train_out: {kind: export, inputs: {data: balanced}, params: {format: parquet, path: out/race, partitions: 2}}
"""


def test_two_concurrent_runs_both_succeed_with_one_checkpoint_per_stage(tmp_path: Path, airflow_home: Path) -> None:
    spec = write_spec(tmp_path / "pipelines", SPEC % CRITEO_SAMPLE, "race.yaml")
    env = cli_env(airflow_home)
    storage = tmp_path / "storage"
    subprocess.run([DAGSPEC, "init"], env=env, check=True, capture_output=True, cwd=REPO, timeout=300)
    cmd = [DAGSPEC, "run", str(spec), "--storage-root", str(storage)]
    runs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=1200)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    for stage in ("raw", "balanced", "train_out"):
        entries = sorted(p.name for p in (storage / "race" / stage).iterdir())
        # one committed checkpoint, no temporary, lease or replaced copy; and the pointer other specs
        # read, naming it
        checkpoints = [name for name in entries if name != LATEST]
        assert len(entries) == 2 and len(checkpoints) == 1, entries
        assert (storage / "race" / stage / checkpoints[0] / "_SUCCESS").exists()
        assert json.loads((storage / "race" / stage / LATEST).read_text())["fingerprint"] == checkpoints[0]
    assert (storage / "exports" / "out" / "race" / "_DAGSPEC_EXPORT.json").exists()
