"""The Connect client process of a stage, started one stage ahead when tasks share a process.

A client process spends ~0.7 s starting Python and importing pyspark's Connect client (pandas,
pyarrow, gRPC) before its stage does anything. Under ``airflow dags test`` (``dagspec run``)
every task of the run executes in the same process, one after another. With
``$DAGSPEC_CLIENT_AHEAD=1`` (set by ``dagspec run``) each task therefore starts the next stage's
client as soon as its own has started. That client imports while this stage runs, then waits for
its stage's arguments and environment on stdin. Elsewhere (a worker runs every task in a process of
its own) nothing is started ahead: the process would end with the task, unused.

A client started ahead is only used by a stage run with the same command and the same
environment, except Airflow's per-task variables (``AIRFLOW_CTX_*``, ``__AIRFLOW_SUPERVISOR_FD``,
``_AIRFLOW_PARSING_CONTEXT_*``) and the ones the operator sets for the stage that a client reads
only once its stage has come (``READ_AFTER_HANDOVER``: no module it imports before reads them). Those arrive with the stage,
with the rest of its environment, over the pipe: never in argv, where other users can read them.

The first stage's client is started by the ``dags test`` process itself, before it imports
Airflow (``start_first``): it imports while Airflow starts and builds its execution API.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

from dagspec.plan.modes import STAGE_ON_STDIN

AHEAD_VAR = "DAGSPEC_CLIENT_AHEAD"
# the task context, its supervisor's socket, the DAG and task Airflow parsed the file for
_PER_TASK_PREFIXES = ("AIRFLOW_CTX_", "__AIRFLOW_", "_AIRFLOW_PARSING_CONTEXT_")
READ_AFTER_HANDOVER = frozenset(
    {
        "PATH",
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
        "DAGSPEC_HOME",
        "DAGSPEC_PLUGINS",
        "DAGSPEC_CONNECT_URL",
        "DAGSPEC_CONNECT_LOCAL",
    }
)

_waiting: dict[tuple[object, ...], subprocess.Popen[str]] = {}


def _key(command: Sequence[str], env: Mapping[str, str]) -> tuple[object, ...]:
    started_with = (
        (k, v) for k, v in env.items() if not k.startswith(_PER_TASK_PREFIXES) and k not in READ_AFTER_HANDOVER
    )
    return (tuple(command), tuple(sorted(started_with)))


def start_first(command: Sequence[str], env: Mapping[str, str]) -> None:
    """Start a client that waits for a stage run with ``command`` (the first task's): with
    ``$DAGSPEC_CLIENT_AHEAD=1``, before the process imports Airflow. One that no stage takes is
    stopped when the next client is started ahead, or at exit."""
    if os.environ.get(AHEAD_VAR) == "1":
        _waiting[_key(command, env)] = _popen([*command, STAGE_ON_STDIN], env, waits=True)


def _popen(argv: Sequence[str], env: Mapping[str, str], *, waits: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        list(argv),
        env=dict(env),
        stdin=subprocess.PIPE if waits else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the task's kill stops it and anything it forked
    )


def _hand_over(process: subprocess.Popen[str], args: Sequence[str], env: Mapping[str, str]) -> bool:
    """Give a waiting client its stage; False if it is gone."""
    if process.poll() is not None or process.stdin is None:
        return False
    try:
        process.stdin.write(json.dumps({"args": list(args), "env": dict(env)}) + "\n")
        process.stdin.close()
    except (BrokenPipeError, OSError):
        return False
    process.stdin = None  # sent and closed: to its readers it is now a process without stdin
    return True


def start_client(
    command: Sequence[str], args: Sequence[str], env: Mapping[str, str]
) -> tuple[subprocess.Popen[str], bool]:
    """A client process running ``command + args`` in ``env``, and whether it was started ahead: one
    started ahead if it matches, else a new one. With ``$DAGSPEC_CLIENT_AHEAD=1`` the next stage's
    client is started too.
    """
    key = _key(command, env)
    waiting = _waiting.pop(key, None)
    process = waiting if waiting is not None and _hand_over(waiting, args, env) else None
    ahead = process is not None
    if process is None:
        if waiting is not None:
            stop(waiting)
        process = _popen([*command, *args], env, waits=False)
    if os.environ.get(AHEAD_VAR) == "1":
        _stop_waiting()  # any left was started for another command or environment: not needed now
        _waiting[key] = _popen([*command, STAGE_ON_STDIN], env, waits=True)
    return process, ahead


def stop(process: subprocess.Popen[str], timeout: float = 5.0) -> None:
    """Stop a client process and what it forked: SIGTERM (the job interrupts its Spark jobs), then
    SIGKILL after ``timeout`` (a trainer in native code sees no signal until it returns to Python)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
            return


@atexit.register
def _stop_waiting() -> None:
    for process in _waiting.values():
        stop(process)
    _waiting.clear()
