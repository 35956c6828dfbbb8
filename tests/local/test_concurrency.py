"""Two `dagspec run` of one spec at once, on a fresh storage root and a fresh Airflow home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration
DAGSPEC = str(Path(sys.executable).parent / "dagspec")


def test_two_concurrent_runs_both_succeed_with_one_checkpoint_per_stage(tmp_path: Path, airflow_home: Path) -> None:
    spec = tmp_path / "pipelines" / "ctr_demo.yaml"
    spec.parent.mkdir()
    spec.write_text((REPO / "pipelines" / "ctr_demo.yaml").read_text().replace("retries: 1", "retries: 0"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC"))}
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home))
    storage = tmp_path / "storage"
    subprocess.run([DAGSPEC, "init"], env=env, check=True, capture_output=True, cwd=REPO, timeout=300)
    cmd = [DAGSPEC, "run", str(spec), "--storage-root", str(storage)]
    runs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=1200)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    for stage in ("raw", "balanced", "split", "train_out"):
        entries = sorted(p.name for p in (storage / "ctr_demo" / stage).iterdir())
        assert len(entries) == 1, entries  # one committed checkpoint, no temporary, lease or replaced copy
        assert (storage / "ctr_demo" / stage / entries[0] / "_SUCCESS").exists()
    assert (storage / "exports" / "out" / "ctr_demo" / "train" / "_DAGSPEC_EXPORT.json").exists()
