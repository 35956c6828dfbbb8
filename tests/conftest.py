"""Shared fixtures: one local[2] SparkSession per test session, paths to the shared data."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagspec.jvm import JAVA_OPTIONS_VAR as JVM_OPTIONS_VAR
from dagspec.jvm import java_options

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()
CRITEO_SAMPLE = SHARED_DATA / "criteo" / "criteo_1tb_sample_1000.tsv"

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Every JVM the tests start (sessions, spark-submits, the Connect server, the cluster's daemons and
# executors) inherits this. The tests' JVMs live seconds on small data, so their cost is start-up:
# C1 only and the serial collector halve the CPU of a spark-submit (measured: 24 s -> 12.6 s of CPU,
# 15.8 s -> 11.6 s wall for a one-job spark-submit on the 2-core machine), and the class archive
# (dagspec.jvm) when built. Results do not change.
if JVM_OPTIONS_VAR not in os.environ:
    os.environ[JVM_OPTIONS_VAR] = java_options({JVM_OPTIONS_VAR: "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"})


@pytest.fixture(scope="session")
def spark() -> Iterator:
    """A small local[2] session shared by every Spark test."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("dagspec-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One local Airflow home for every test that runs `dagspec run`: its SQLite DB is migrated once
    (tens of seconds), and runs of different DAGs or folders do not disturb each other in it."""
    return tmp_path_factory.mktemp("airflow-home") / "airflow"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project home whose storage root is under tmp_path."""
    monkeypatch.setenv("DAGSPEC_HOME", str(REPO))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "storage"))
    return REPO


# `make test` runs the suite in two pytest-xdist workers (`-n 2 --dist loadfile`). A file stays in
# one worker (module fixtures and tests that build on each other stay together); the files below
# share a group, because they share the local Spark Connect server (they start it, reuse it, or kill
# it on purpose) or a package fixture; xdist queues the groups with the most tests first. pytest 9.2
# keeps a node id that xdist 3.8's `xdist_group` marks cannot suffix, so the groups are given to
# xdist's own file scheduler here instead of as marks.
SHARED_GROUPS = {
    "tests/local/test_run.py": "connect-server",
    "tests/local/test_run_matrix.py": "connect-server",
    "tests/local/test_run_progress.py": "connect-server",
    "tests/local/test_run_history.py": "connect-server",
    "tests/local/test_concurrency.py": "connect-server",
    "tests/local/test_connect_server.py": "connect-server",
    "tests/local/test_user_kind.py": "connect-server",
    "tests/local/test_partitions_cli.py": "connect-server",
    "tests/airflow/test_ui.py": "connect-server",  # `airflow up` starts the server, `down` stops it
    "tests/airflow/test_linked_specs_live.py": "connect-server",  # shares test_ui's session Airflow
    "tests/airflow/test_results_view_live.py": "connect-server",  # the same session Airflow
    "tests/airflow/test_lineage_live.py": "connect-server",  # its runs are clients of the shared server
    "tests/test_bench_scale.py": "connect-server",  # its smoke run is a client of the shared server
    # clients of the shared server: a plugin test elsewhere restarts it (its code hash changes)
    "tests/job/test_failure.py": "connect-server",
    "tests/airflow/test_operator_failure.py": "connect-server",
    "tests/kinds/scoring/": "scoring-models",
}


def shared_state_scope(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((group for prefix, group in SHARED_GROUPS.items() if path.startswith(prefix)), path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedStateScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return shared_state_scope(nodeid)

    return SharedStateScheduling(config, log)


_SERVER_WAS_RUNNING = pytest.StashKey[bool]()


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Runs through `dagspec run` start the local Spark Connect server and reuse it: note whether it
    was already running (a developer's own) before any worker starts."""
    from dagspec.job.connect_server import ServerSettings, answering

    if not _is_xdist_worker(session.config):
        session.config.stash[_SERVER_WAS_RUNNING] = answering(ServerSettings.from_env().port)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the server the tests started, once every worker is done (here, not in a worker)."""
    from dagspec.job.connect_server import stop_server

    if not _is_xdist_worker(session.config) and not session.config.stash.get(_SERVER_WAS_RUNNING, True):
        stop_server(REPO)
