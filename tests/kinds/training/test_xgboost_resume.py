"""A killed train_xgboost spark-submit resumes from its last checkpoint (real process, SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagspec.spec.loader import load_spec
from tests.conftest import CRITEO_SAMPLE, REPO
from tests.helpers import manifest, run_stages, write_spec

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.system]

ROUNDS = 150


def _submit(stage_json: str) -> subprocess.Popen:
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
    }
    argv = [str(venv_bin / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
            str(REPO / "jobs" / "run_stage.py"), stage_json]  # fmt: skip
    # its own process group, so the kill takes the JVM and every Python child with it
    return subprocess.Popen(argv, env=env, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)  # fmt: skip


@pytest.mark.parametrize("workers", [1, 2], ids=["single_node", "spark"])
def test_killed_training_resumes_from_the_last_checkpoint(spark, home, tmp_path: Path, workers: int) -> None:
    # 20 copies of the real sample: enough rows that rounds take a moment
    data = tmp_path / "days"
    data.mkdir()
    (data / "big.tsv").write_bytes(CRITEO_SAMPLE.read_bytes() * 20)
    spec = load_spec(
        write_spec(
            tmp_path / "pipelines",
            f"""
            stages:
              raw: {{kind: read, params: {{format: criteo, path: "{data}/big.tsv"}}}}
              as_is: {{kind: ctr_features, inputs: {{data: raw}}, params: {{mode: as_is}}}}
              xgb:
                kind: train_xgboost
                inputs: {{train: as_is}}
                params: {{workers: {workers}, num_round: {ROUNDS}, checkpoint_every: 10, max_depth: 8, gamma: 0, min_child_weight: 1,
                          lambda: 1, eta: 0.05, subsample: 1.0, nthread: 1}}
            """,
        )
    )
    stage = run_stages(spark, spec, ("raw", "as_is"))["xgb"]  # keyed on what they committed
    checkpoint = Path(stage.stage_dir) / f"_scratch-{stage.fingerprint}" / "xgboost" / "booster.ubj"

    first = _submit(stage.to_json())
    deadline = time.monotonic() + 600
    while not checkpoint.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert checkpoint.exists(), (
        f"no checkpoint appeared; job exit {first.poll()}: {first.stdout.read().decode()[-3000:]}"
    )
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert not Path(stage.success_path).exists(), "the job finished before it could be killed"

    second = _submit(stage.to_json())
    output, _ = second.communicate(timeout=900)
    assert second.returncode == 0, output.decode()[-3000:]
    metrics = manifest(stage)["metrics"]
    assert metrics["resumed_from_round"] >= 10 and metrics["resumed_from_round"] % 10 == 0
    assert metrics["rounds"] == ROUNDS
    meta = json.loads((Path(stage.output_path("model")) / "model.json").read_text())
    assert meta["resumed_from_round"] == metrics["resumed_from_round"] and meta["rounds"] == ROUNDS
    assert meta["mode"] == ("single_node" if workers == 1 else "spark")
    assert not checkpoint.parent.parent.exists()  # the scratch area goes with the commit
