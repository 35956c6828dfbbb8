"""A train_keras job killed with SIGKILL mid-training resumes after its last epoch checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagspec.kinds.training.keras_loop import checkpoint_history, latest_checkpoint
from dagspec.spec.loader import load_spec
from tests.conftest import REPO
from tests.helpers import run_stages
from tests.kinds.training.test_train_keras import events_spec, physics_events

pytestmark = [pytest.mark.spark, pytest.mark.integration]

EPOCHS = 6
KILL_AFTER = 2


def _submit(stage_json: str, log: Path) -> subprocess.Popen:
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ)
    env.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        TF_CPP_MIN_LOG_LEVEL="2",
    )
    cmd = [
        str(venv_bin / "spark-submit"),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        str(REPO / "jobs" / "run_stage.py"),
        stage_json,
    ]
    with open(log, "ab") as out:
        # its own process group, so the kill takes the JVM, the Python driver and its workers at once
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def test_sigkilled_training_resumes_at_the_next_epoch(spark, home, tmp_path: Path) -> None:
    spec = events_spec(
        tmp_path,
        {"events": (physics_events(spark, 4000), 2)},
        f"""
        model:
          kind: train_keras
          inputs: {{train: events}}
          params: {{architecture: hlf_dense, epochs: {EPOCHS}, batch_size: 16, steps_per_execution: 8}}
        """,
    )
    stage = run_stages(spark, load_spec(spec), ["events"])["model"]  # keyed on the committed events
    checkpoints = Path(stage.stage_dir) / f"_scratch-{stage.fingerprint}" / "checkpoints"
    log = tmp_path / "spark-submit.log"

    first = _submit(stage.to_json(), log)
    deadline = time.monotonic() + 900
    while latest_checkpoint(checkpoints) is None or latest_checkpoint(checkpoints)[0] < KILL_AFTER:
        assert first.poll() is None, f"the job ended before epoch {KILL_AFTER}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    done, path = latest_checkpoint(checkpoints)
    assert KILL_AFTER <= done < EPOCHS, "killed too late to test a resume"
    assert not Path(stage.success_path).exists()
    saved_loss = checkpoint_history(path)["loss"]

    second = _submit(stage.to_json(), log)
    assert second.wait(timeout=900) == 0, log.read_text()[-5000:]
    manifest = json.loads((Path(stage.checkpoint_dir) / "manifest.json").read_text())
    metrics = manifest["metrics"]
    assert metrics["resumed_epoch"] == done
    assert len(metrics["history"]["loss"]) == EPOCHS
    assert metrics["history"]["loss"][:done] == saved_loss
    assert f"resumed from epoch-{done:04d}.npz: {done} of {EPOCHS} epochs done" in log.read_text()
    model = Path(stage.output_path("model"))
    assert (model / "model.keras").is_file()
    assert json.loads((model / "model.json").read_text())["resumed_epoch"] == done
    assert not checkpoints.parent.exists()  # the scratch area goes with the commit
