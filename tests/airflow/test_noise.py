"""Third-party noise is kept out of the head of the logs of the Airflow processes dagspec starts.

The child process imports what ``airflow dags test`` imports before its first task (Airflow's dags
commands, the dag-factory plugin, the in-process execution API's test client), as
``dagspec.airflow.short_command`` does, with the environment ``dagspec run`` gives it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dagspec.airflow.noise import IGNORED_WARNINGS, python_warnings
from dagspec.local.airflow_env import airflow_env

CHILD = """
import logging, warnings, sys
if sys.argv[1] == "quiet":
    from dagspec.airflow.noise import quiet_loggers
    quiet_loggers()
import airflow
import airflow.cli.commands.dag_command
import dagfactory.dagbuilder
import fastapi.testclient
warnings.warn("a stage's own warning", UserWarning)
logging.getLogger("dagfactory").warning("a real dag-factory problem")
print("imports done", flush=True)
"""
NOISE = ("graphviz", "is deprecated", "apache-airflow-providers-http is not installed")


def _child(tmp_path: Path, env: dict[str, str], mode: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        env={**env, "AIRFLOW_HOME": str(tmp_path / "airflow")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return (done.stdout + done.stderr).splitlines()


def test_the_head_of_the_log_has_no_third_party_noise(tmp_path: Path) -> None:
    env = {**os.environ, **airflow_env(tmp_path)}
    lines = _child(tmp_path, env, "quiet")
    head = lines[:20]
    assert [line for line in head if any(noise in line for noise in NOISE)] == []
    # what is the user's business still prints
    assert any("a stage's own warning" in line for line in head)
    assert any("a real dag-factory problem" in line for line in head)


def test_without_the_filters_the_same_imports_are_noisy(tmp_path: Path) -> None:
    """The test above is not vacuous: these imports print each kind of noise it looks for."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONWARNINGS"}
    text = "\n".join(_child(tmp_path, env, "plain"))
    assert all(noise in text for noise in NOISE)


def test_the_users_warning_filters_come_last_and_win() -> None:
    value = python_warnings("error::UserWarning")
    assert value.split(",") == [*IGNORED_WARNINGS, "error::UserWarning"]
    assert python_warnings(value) == value  # a nested dagspec (after `source .dagspec/env`) adds nothing
