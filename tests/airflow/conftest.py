"""The session's one real Airflow (see tests/airflow/live.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagspec.local.airflow_server import airflow_down, airflow_up
from dagspec.processes import free_port, tail
from tests.airflow.live import LIVE_SPECS_HOOK, Airflow, Api
from tests.conftest import REPO


@pytest.fixture(scope="session")
def live_airflow(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Airflow]:
    """Airflow on its own AIRFLOW_HOME, storage root and pipelines folder, stopped whatever happens.

    The folder holds the specs of every collected module's ``live_specs(root)``, written before
    the start. Its DAGs start paused; a module unpauses what it runs."""
    root = tmp_path_factory.mktemp("live-airflow")
    pipelines = root / "pipelines"
    pipelines.mkdir()
    modules = {item.module for item in request.session.items if isinstance(item, pytest.Function)}
    for module in sorted(modules, key=lambda m: m.__name__):
        for name, text in getattr(module, LIVE_SPECS_HOOK, lambda _root: {})(root).items():
            assert not (pipelines / name).exists(), f"{module.__name__}: {name} is another module's spec"
            (pipelines / name).write_text(text)
    run_dir = root / "run"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSPEC_HOME", str(REPO))
        env.setenv("DAGSPEC_PIPELINES", str(pipelines))
        env.setenv("DAGSPEC_AIRFLOW_HOME", str(root / "airflow"))
        env.setenv("DAGSPEC_STORAGE_ROOT", str(root / "storage"))
        env.setenv("DAGSPEC_WATCH_ROOTS", str(root))  # the files schedules watch folders of this root
        env.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)  # local[*]: these tests are about Airflow
        started = time.monotonic()
        try:
            status = airflow_up(port=free_port(), home=REPO, run_dir=run_dir, history_port=free_port())
            print(f"airflow up in {time.monotonic() - started:.1f} s\n{status}")
            assert status.password_file is not None
            password = json.loads(Path(status.password_file).read_text())["admin"]
            assert status.url is not None
            yield Airflow(status, Api(status.url, password), root, password)
        except BaseException:
            for log in sorted(run_dir.glob("*.log")):
                print(f"--- {log.name} ---\n{tail(log, 40)}")
            raise
        finally:
            print(airflow_down(run_dir=run_dir))
