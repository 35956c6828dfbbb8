"""`dagspec run` with its output not a terminal: a long stage's progress lines come before its final line.

Real `airflow dags test`, stages as clients of the local Spark Connect server; the long stage is a
single-node XGBoost of many rounds on a small generated table, whose rounds are reported by the
trainer; the Spark stages report through the Connect client's progress handler. The interval is
set low by the environment; the only time property checked is the throttle, on the job's clock.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from pathlib import Path

import pytest

from dagspec.plan.progress import PROGRESS_PREFIX, find_progress
from tests.conftest import REPO
from tests.helpers import DAGSPEC, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
INTERVAL = 1.0
ROUNDS = 600  # seconds of rounds: several intervals of progress lines on a fast machine, no more
SPEC = """\
dag_id: progress_demo
default_args: {retries: 0}
spark: {conf: {spark.sql.shuffle.partitions: 2}}
stages:
  logs: {kind: generate_criteo_logs, params: {rows: 20000, seed: 3, base_ctr: 0.2}}
  raw: {kind: read_criteo, inputs: {logs: logs}}
  as_is: {kind: ctr_features, inputs: {data: raw}, params: {mode: as_is}}
  held: {kind: split, inputs: {data: as_is}, params: {fractions: {train: 0.7, test: 0.3}, seed: 7}}
  xgb:
    kind: train_xgboost
    inputs: {train: held.train, validation: held.test}
""" + (
    f"    params: {{num_round: {ROUNDS}, max_depth: 10, min_child_weight: 1, lambda: 1, gamma: 0, nthread: 1, "
    "checkpoint_every: 500}\n"
)


def test_a_long_stage_prints_throttled_progress_before_its_final_line(tmp_path: Path, airflow_home: Path) -> None:
    spec = write_spec(tmp_path / "pipelines", SPEC, "progress_demo.yaml")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k == "DAGSPEC_CONNECT_PORT"
    }
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home), DAGSPEC_PROGRESS_INTERVAL=str(INTERVAL))
    storage = tmp_path / "storage"
    argv = [DAGSPEC, "run", str(spec), "--storage-root", str(storage)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=580, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout.splitlines()
    assert not any("\x1b[" in line for line in out)  # not a terminal: plain lines, no redraws

    # the long stage: its rounds, in order, before its final line
    final = next(i for i, line in enumerate(out) if re.match(r"  xgb\s+ran\b", line))
    rounds = [i for i, line in enumerate(out) if line.startswith("progress  xgb ") and " round " in line]
    assert rounds and max(rounds) < final, done.stdout
    shown = [int(re.search(rf" round (\d+)/{ROUNDS}", out[i]).group(1)) for i in rounds]  # type: ignore[union-attr]
    assert shown == sorted(shown) and shown[0] < ROUNDS  # reported while it trained

    # the run log holds every marker the jobs printed: per stage no two closer than the interval
    log = REPO / re.search(r"log: (\S+)", done.stdout).group(1)  # type: ignore[union-attr]
    markers = find_progress(log.read_text().splitlines())
    assert {p.stage for p in markers} >= {"xgb"}
    for stage in {p.stage for p in markers}:
        running = [p.elapsed_s for p in markers if p.stage == stage and not p.finished]
        assert all(b - a >= INTERVAL for a, b in itertools.pairwise(running)), (stage, running)
        assert [p for p in markers if p.stage == stage][-1].finished  # the stage's last line closes it
    # one plain line on stdout per running marker in the log
    assert len([line for line in out if line.startswith("progress ")]) == len([p for p in markers if not p.finished])
    xgb = [p for p in markers if p.stage == "xgb" and p.training is not None and not p.finished]
    assert xgb and set(xgb[0].training.metrics) == {"train-logloss", "validation-logloss"}  # type: ignore[union-attr]
    assert not list(storage.glob(f"progress_demo/*/{PROGRESS_PREFIX}*"))  # files gone once the stages ended
