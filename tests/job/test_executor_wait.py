"""A stage's own driver fails within its bound when no executor comes, with the cause first.

A real standalone master with no worker: an application registers and never gets an executor
(what the Connect server holding every core looked like in the compose stack). The driver, under
spark-submit, must exit within DAGSPEC_EXECUTOR_WAIT_S, naming what holds the cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagspec.job.executor_wait import EXIT_CODE, cluster_holders, master_state
from dagspec.plan.failure import find_failure
from dagspec.processes import free_port
from tests.conftest import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

DRIVER = """
import sys
from dagspec.job.executor_wait import watch_executors
from dagspec.job.session import create_session
from dagspec.plan.failure import StageFailure
spark = create_session("dagspec.demo.starved")
# what the stage entry does: the cause becomes the stage's failure marker
watch_executors(spark, "dagspec.demo.starved", lambda cause: print(StageFailure("starved", "sql", cause).marker_line()))
spark.range(10).count()  # never gets an executor
print("UNREACHABLE")
"""


@pytest.fixture(scope="module")
def lonely_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """spark://... and the web UI URL of a master without workers."""
    port, ui = free_port(), free_port()
    spark_class = Path(sys.executable).parent / "spark-class"
    log = tmp_path_factory.mktemp("master") / "master.log"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    argv = [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("w") as out:
        master = subprocess.Popen(
            [*argv, "--webui-port", str(ui)], stdout=out, stderr=out, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{ui}"
    try:
        deadline = time.monotonic() + 120
        while master_state(url) is None:
            assert master.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", url
    finally:
        os.killpg(master.pid, signal.SIGTERM)
        master.wait(timeout=60)


def test_a_driver_without_executors_fails_within_its_bound_naming_the_cause(
    lonely_master: tuple[str, str], tmp_path: Path
) -> None:
    master, ui = lonely_master
    script = tmp_path / "starved.py"
    script.write_text(DRIVER)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "DAGSPEC_EXECUTOR_WAIT_S": "8", "DAGSPEC_SPARK_MASTER_UI": ui}
    submit = Path(sys.executable).parent / "spark-submit"
    start = time.monotonic()
    done = subprocess.run(
        [str(submit), "--master", master, "--conf", "spark.executor.memory=2g", str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == EXIT_CODE, done.stderr[-3000:]
    assert "UNREACHABLE" not in done.stdout
    assert (
        f"stage failed: no Spark executor accepted dagspec.demo.starved within 8 s on {master}: the cluster's cores "
        "are held by no other application (0 of 0 in use; free per worker: no worker alive); it asks for "
        "executors of 2g"
    ) in done.stdout + done.stderr  # spark-submit relays the Python driver's output
    failure = find_failure((done.stdout + done.stderr).splitlines())
    assert failure is not None and failure.cause.startswith(
        f"no Spark executor accepted dagspec.demo.starved within 8 s on {master}: the cluster's cores"
    )
    assert time.monotonic() - start < 200


def test_the_cause_names_the_applications_holding_the_cores() -> None:
    # the shape of a standalone master's /json/ (Spark 4.x)
    state = {
        "cores": 4,
        "coresused": 4,
        "workers": [
            {"host": "spark-worker-1", "coresfree": 0, "memoryfree": 1024},
            {"host": "spark-worker-2", "coresfree": 0, "memoryfree": 1024},
        ],
        "activeapps": [
            {"name": "Spark Connect server", "cores": 2},
            {"name": "dagspec.topology_classifier.hlf_classifier", "cores": 2},
            {"name": "dagspec.topology_classifier.gru_classifier", "cores": 0},
        ],
    }
    assert cluster_holders(state, "dagspec.topology_classifier.gru_classifier") == (
        "the cluster's cores are held by Spark Connect server (2 cores), dagspec.topology_classifier.hlf_classifier "
        "(2 cores) (4 of 4 in use; free per worker: spark-worker-1 0 cores/1024 MB, spark-worker-2 0 cores/1024 MB)"
    )
