"""Ctrl-C on `dagspec run` while a stage runs: the run ends, and no stage process is left behind
(the Connect client of the running stage, started in a session of its own, and the one started
ahead for the next stage), however long the stage's own code would still have run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import DAGSPEC, cli_env, write_spec

pytestmark = pytest.mark.integration

NAP_KIND = '''
"""A stage whose own code runs for minutes (it sleeps in the stage's process)."""
import time

from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind


@kind("nap", params=StageParams)
def nap(inputs: Inputs, params: StageParams, ctx: StageContext) -> Outputs:
    """Sleep for ten minutes, then return a small table."""
    time.sleep(600)
    return {"data": ctx.spark.range(1)}
'''

SPEC = """default_args: {retries: 0}
stages:
  napping: {kind: nap}
  after: {kind: sql, inputs: {t: napping}, params: {query: "SELECT COUNT(*) AS n FROM t"}}
"""


def _marked(mark: str) -> list[str]:
    """The live processes that carry ``mark`` in their environment (Java servers left out: a Connect
    server the run started is long-lived on purpose), as 'pid cmdline'."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if mark.encode() not in (proc / "environ").read_bytes():
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(line for line in (proc / "status").read_text().splitlines() if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if "java" not in cmdline.split(" ", 1)[0] and "zombie" not in state:
            found.append(f"{proc.name} {cmdline[:200]}")
    return found


def test_ctrl_c_ends_the_run_and_leaves_no_stage_process(tmp_path: Path, airflow_home: Path) -> None:
    spec = write_spec(tmp_path / "pipelines", SPEC, "napping.yaml")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "nap_kind.py").write_text(NAP_KIND)
    mark = f"interrupt-{uuid.uuid4().hex}"
    env = cli_env(airflow_home, DAGSPEC_PLUGINS=str(plugins), DAGSPEC_TEST_MARK=mark)
    log = tmp_path / "run.out"
    with log.open("w") as out:
        run = subprocess.Popen(
            [DAGSPEC, "run", str(spec), "--storage-root", str(tmp_path / "storage")],
            env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        # the napping stage's client holds its attempt folder (a client started ahead: no stage in argv)
        attempts = tmp_path / "storage" / "napping" / "napping"
        while not (any("run_stage.py" in p for p in _marked(mark)) and list(attempts.glob("_tmp-*"))):
            assert run.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        time.sleep(3)  # the stage is inside its kind's code
        os.killpg(run.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
        assert run.wait(timeout=120) == 130
        deadline = time.monotonic() + 30
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(1)
        assert _marked(mark) == [], log.read_text()[-3000:]
        text = log.read_text()
        assert text.rstrip().endswith("interrupted") and "Traceback" not in text, text[-3000:]
    finally:
        for line in _marked(mark):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
