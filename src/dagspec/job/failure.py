"""The root cause of an exception that ended a stage, as a :class:`StageFailure`.

Checked in this order, on the exception and its causes (``raise ... from``, ``during handling``):
out of memory (a Python worker's MemoryError under ``spark.executor.pyspark.memory`` named as such) and
a lost worker or executor (their Spark wrappers carry a generic error class), a
Spark error class (``getCondition()`` of pyspark's ``PySparkException`` family: analysis, parse,
Connect gRPC errors), a dagspec error (its own message), else a Python exception: its type, its
message and its last frame in stage code. Duck typing only: the same text comes from a Connect
client and from a driver of its own.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from typing import Any

from dagspec.errors import DagspecError
from dagspec.plan.failure import StageFailure

_OOM_MARKERS = (
    "java.lang.OutOfMemoryError",
    "SparkOutOfMemoryError",
    "MemoryError",
    "exceeding memory limits",
    "OOMKilled",
    "UNABLE_TO_ACQUIRE_MEMORY",
)
_LOST_MARKERS = (
    "ExecutorLostFailure",
    "Python worker exited unexpectedly",
    "PYTHON_WORKER_EXITED_UNEXPECTEDLY",
    "Lost executor",
    "Worker lost",
    "worker lost",
    "Executor lost",
    "killed by signal",
)
_PYTHON_WORKER = "exception was thrown from the Python worker"  # Spark's PythonException text
_ADVICE = re.compile(r"\. Consider setting .*$")  # Spark's hint after a crashed worker: faulthandler confs
_SHIPPED = "/userFiles-"  # where a Spark driver keeps the files spark-submit shipped to it
_SQLSTATE = re.compile(r"\.? ?SQLSTATE: \w+;?")
_TRAILING_POSITION = re.compile(r" line (\d+) pos (\d+);?$")  # an analysis error's, after its SQLSTATE
_LIBRARY_PARTS = ("site-packages", "dist-packages", "/pyspark/", "/lib/python", "/dagspec/job/", "<frozen")


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found and len(found) < 20:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _call(exc: BaseException, method: str) -> str:
    function = getattr(exc, method, None)
    if not callable(function):
        return ""
    try:
        value = function()
    except Exception:  # an accessor that fails (no error class, a JVM gone) has no value to show, whatever it raises
        return ""
    return str(value) if value else ""


def _first_line(text: str, limit: int = 400) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _line_with(text: str, markers: tuple[str, ...]) -> str | None:
    """The first line naming one of ``markers``, from the first marker on, without its SQLSTATE."""
    for line in text.splitlines():
        at = [line.find(m) for m in markers if m in line]
        if at:
            return _first_line(_SQLSTATE.sub("", line[min(at) :]).strip().rstrip(":"), 300)
    return None


def spark_message(exc: BaseException, condition: str) -> str:
    """``[CLASS] message (line 1, pos 38)``: the first line without the SQLSTATE."""
    line = _TRAILING_POSITION.sub(r" (line \1, pos \2)", _SQLSTATE.sub("", _first_line(str(exc))).strip())
    return line if line.startswith("[") else f"[{condition}] {line}"


def _in_stage_code(filename: str, code_files: tuple[str, ...]) -> bool:
    if any(filename == f or filename.startswith(f.rstrip("/") + "/") for f in code_files):
        return True
    return not any(part in filename for part in _LIBRARY_PARTS)


def python_cause(exc: BaseException, code_files: tuple[str, ...] = (), home: Path | None = None) -> str:
    """``ValueError: message (at plugins/kind.py:12 in function)``: the last frame in stage code."""
    text = f"{type(exc).__name__}: {_first_line(str(exc))}" if str(exc) else type(exc).__name__
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _in_stage_code(f.filename, code_files)]
    if not frames:
        return text
    frame = frames[-1]
    shown = frame.filename
    if _SHIPPED in shown:  # spark-submit's copy of a plugin file (--py-files): name the file itself
        shown = next((f for f in code_files if Path(f).name == Path(shown).name and _SHIPPED not in f), shown)
    if home is not None and Path(shown).is_relative_to(home):
        shown = str(Path(shown).relative_to(home))
    return f"{text} (at {shown}:{frame.lineno} in {frame.name})"


def _sql_param(exc: BaseException, text: str, params: dict[str, Any]) -> str:
    """The param the failing SQL came from: the one whose text the error quotes, else ``query``."""
    quoted = [
        name
        for name, value in params.items()
        if isinstance(value, str) and " " in value.strip() and value.strip() in text
    ]
    if len(quoted) == 1:
        return quoted[0]
    names = {type(e).__name__ for e in _chain(exc)}
    if names & {"ParseException", "AnalysisException"} and isinstance(params.get("query"), str):
        return "query"
    return ""


def stage_failure(
    exc: BaseException,
    stage: str,
    kind: str,
    params: dict[str, Any],
    *,
    code_files: tuple[str, ...] = (),
    home: Path | None = None,
) -> StageFailure:
    """The root cause of ``exc``, which ended stage ``stage`` of kind ``kind``."""
    chain = _chain(exc)
    text = "\n".join(f"{type(e).__name__}: {e}" for e in chain)
    oom = _line_with(text, _OOM_MARKERS)
    if oom is not None and _PYTHON_WORKER in text and oom.startswith("MemoryError"):
        cause = (
            f"out of memory in a Python worker ({oom}); give it more memory: the stage's spark.conf "
            "spark.executor.pyspark.memory (its limit), or fewer rows per partition"
        )
        return StageFailure(stage, kind, cause)
    if oom is not None:
        cause = (
            f"out of memory ({oom}); give it more memory: the stage's spark.resources "
            "driver_memory / executor_memory, or fewer rows per partition"
        )
        return StageFailure(stage, kind, cause)
    lost = _line_with(text, _LOST_MARKERS)
    if lost is not None:
        cause = (
            f"a worker or executor was lost ({_ADVICE.sub('.', lost).rstrip('.')}); killed from outside or by the "
            "machine's memory limit: see the worker's log"
        )
        return StageFailure(stage, kind, cause)
    for error in chain:
        condition = _call(error, "getCondition") or _call(error, "getErrorClass")
        if condition:
            return StageFailure(stage, kind, spark_message(error, condition), _sql_param(error, text, params))
    if isinstance(exc, DagspecError):
        message = str(exc)
        prefix = f"stage {stage!r}: "
        return StageFailure(stage, kind, message[len(prefix) :] if message.startswith(prefix) else message)
    return StageFailure(stage, kind, python_cause(exc, code_files, home))
