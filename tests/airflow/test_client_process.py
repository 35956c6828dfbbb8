"""Connect client processes started one stage ahead: handed their stage over stdin, or not used.

The processes are real; the client is a small script speaking the job entry's protocol (the
real entry's side is the last test), so no Spark is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from dagspec.airflow import client_process
from dagspec.airflow.client_process import AHEAD_VAR, start_client
from tests.conftest import REPO

# prints its pid, its arguments and one variable of its environment, after the stage arrives
FAKE_CLIENT = """
import json, os, sys
args = sys.argv[1:]
if args == ["--stage-on-stdin"]:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    message = json.loads(line)
    os.environ.clear()
    os.environ.update(message["env"])
    args = message["args"]
print(json.dumps({"pid": os.getpid(), "args": args, "task": os.environ.get("AIRFLOW_CTX_TASK_ID"),
                  "url": os.environ.get("DAGSPEC_CONNECT_URL")}))
"""
COMMAND = [sys.executable, "-c", FAKE_CLIENT]


@pytest.fixture(autouse=True)
def nothing_waiting() -> Iterator[None]:
    client_process._stop_waiting()
    yield
    client_process._stop_waiting()


def task_env(task_id: str, **more: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "AIRFLOW_CTX_TASK_ID": task_id, "__AIRFLOW_SUPERVISOR_FD": task_id, **more}


def result(process: subprocess.Popen[str]) -> dict:
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    return json.loads(out)


def test_the_next_stage_runs_in_the_process_started_ahead_with_its_own_task_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(AHEAD_VAR, "1")
    first, ahead = start_client(COMMAND, ["--force", "stage-a"], task_env("a"))
    assert not ahead
    assert result(first) == {"pid": first.pid, "args": ["--force", "stage-a"], "task": "a", "url": None}
    (waiting,) = client_process._waiting.values()
    second, ahead = start_client(COMMAND, ["stage-b"], task_env("b"))
    assert ahead and second is waiting
    assert result(second) == {"pid": waiting.pid, "args": ["stage-b"], "task": "b", "url": None}
    assert len(client_process._waiting) == 1  # and one more for the stage after


def test_a_process_started_for_another_environment_is_stopped_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AHEAD_VAR, "1")
    start_client(COMMAND, ["stage-a"], task_env("a"))[0].communicate(timeout=60)
    (waiting,) = client_process._waiting.values()
    other, ahead = start_client(COMMAND, ["stage-b"], task_env("b", PYTHONPATH="/somewhere/else"))
    assert not ahead and other is not waiting
    assert result(other)["args"] == ["stage-b"]
    assert waiting.wait(timeout=10) is not None


def test_the_first_stage_takes_the_client_started_before_airflow_with_the_operators_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``start_first`` (the ``dags test`` process, before Airflow): the variables the operator adds
    for the stage, and the DAG Airflow parsed the file for, are the stage's; nothing else may differ."""
    monkeypatch.setenv(AHEAD_VAR, "1")
    before_airflow = {"PATH": os.environ["PATH"], "OMP_NUM_THREADS": "2"}
    client_process.start_first(COMMAND, before_airflow)
    (waiting,) = client_process._waiting.values()
    operators = {
        **before_airflow,
        "PATH": f"/venv/bin:{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
        "DAGSPEC_HOME": "/project",
        "DAGSPEC_CONNECT_URL": "sc://127.0.0.1:15002",
        "DAGSPEC_CONNECT_LOCAL": "1",
        "_AIRFLOW_PARSING_CONTEXT_DAG_ID": "pipe",
    }
    first, ahead = start_client(COMMAND, ["stage-a"], task_env("a", **operators))
    assert ahead and first is waiting
    expected = {"pid": waiting.pid, "args": ["stage-a"], "task": "a", "url": "sc://127.0.0.1:15002"}
    assert result(first) == expected
    # one started with another value of a variable read at start (OMP_NUM_THREADS: numpy's import) is not used
    client_process._stop_waiting()  # the one started ahead for the next stage
    client_process.start_first(COMMAND, {**before_airflow, "OMP_NUM_THREADS": "8"})
    (stale,) = client_process._waiting.values()
    again, ahead = start_client(COMMAND, ["stage-b"], task_env("b", **operators))
    assert not ahead and again is not stale and result(again)["url"] == "sc://127.0.0.1:15002"
    assert stale.wait(timeout=10) is not None


def test_without_the_variable_nothing_is_started_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AHEAD_VAR, raising=False)
    process, ahead = start_client(COMMAND, ["stage-a"], task_env("a"))
    assert not ahead and result(process)["args"] == ["stage-a"]
    assert client_process._waiting == {}


def test_the_process_left_waiting_at_exit_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AHEAD_VAR, "1")
    start_client(COMMAND, ["stage-a"], task_env("a"))[0].communicate(timeout=60)
    (waiting,) = client_process._waiting.values()
    client_process._stop_waiting()
    assert waiting.poll() is not None and client_process._waiting == {}


def test_the_job_entry_takes_its_stage_from_stdin_or_leaves_quietly() -> None:
    entry = [sys.executable, str(REPO / "jobs" / "run_stage.py"), "--stage-on-stdin"]
    unused = subprocess.run(entry, input="", capture_output=True, text=True, timeout=120)
    assert (unused.returncode, unused.stdout, unused.stderr) == (0, "", "")
    message = json.dumps({"args": [], "env": {"PATH": os.environ["PATH"]}})
    handed = subprocess.run(entry, input=message + "\n", capture_output=True, text=True, timeout=120)
    assert handed.returncode == 2 and "usage: run_stage.py" in handed.stderr  # main() got the (empty) arguments
