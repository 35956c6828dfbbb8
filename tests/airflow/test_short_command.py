"""``python -m dagspec.airflow.short_command``: Airflow's own CLI, with Airflow's output and exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import airflow

SHORT = [sys.executable, "-m", "dagspec.airflow.short_command"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}


def test_a_command_prints_what_airflow_prints(tmp_path: Path) -> None:
    done = subprocess.run([*SHORT, "version"], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == airflow.__version__


def test_a_failing_command_exits_with_airflows_status(tmp_path: Path) -> None:
    done = subprocess.run([*SHORT, "dags", "nonsense"], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2  # argparse's usage error, as `airflow dags nonsense` gives
    assert "invalid choice" in done.stderr
