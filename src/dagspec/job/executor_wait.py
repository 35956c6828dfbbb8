"""A stage's own driver on a cluster fails, instead of waiting forever, when no executor comes.

A standalone master gives an application executors only from free cores and memory. When a
long-lived application (the Spark Connect server) or other stages hold them, or no worker offers
the executor memory asked for, Spark only logs ``Initial job has not accepted any resources`` and
waits. The watchdog ends the stage after ``DAGSPEC_EXECUTOR_WAIT_S`` seconds (300; 0: never) with
the cause first, naming the applications that hold the cluster's cores when the master's web UI
(``DAGSPEC_SPARK_MASTER_UI``) answers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dagspec.stage")
WAIT_VAR = "DAGSPEC_EXECUTOR_WAIT_S"
MASTER_UI_VAR = "DAGSPEC_SPARK_MASTER_UI"
DEFAULT_WAIT_S = 300.0
EXIT_CODE = 3


def wait_seconds() -> float:
    """The bound from the environment (0 or less: wait as long as Spark does)."""
    try:
        return float(os.environ.get(WAIT_VAR, DEFAULT_WAIT_S))
    except ValueError:
        return DEFAULT_WAIT_S


def executor_count(spark: SparkSession) -> int:
    """Executors registered with this driver (the driver itself is listed too, and not counted)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return max(len(infos) - 1, 0)


def master_state(ui_url: str) -> dict[str, Any] | None:
    """The standalone master's /json/ (workers, applications), or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"{ui_url.rstrip('/')}/json/", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
            return state
    except (OSError, ValueError):
        return None


def cluster_holders(state: dict[str, Any], app_name: str) -> str:
    """Who holds the cluster's cores and memory, as one clause of the message."""
    apps = [a for a in state.get("activeapps", []) if a.get("name") != app_name and a.get("cores")]
    held = ", ".join(f"{a['name']} ({a['cores']} cores)" for a in apps) or "no other application"
    free = [
        f"{w.get('host', '?')} {w.get('coresfree', 0)} cores/{w.get('memoryfree', 0)} MB"
        for w in state.get("workers", [])
    ]
    return (
        f"the cluster's cores are held by {held} ({state.get('coresused', '?')} of {state.get('cores', '?')} in use; "
        f"free per worker: {', '.join(free) or 'no worker alive'})"
    )


def timeout_message(spark: SparkSession, app_name: str, waited_s: float) -> str:
    """The error line: the cause first, then what to change."""
    conf = spark.sparkContext.getConf()
    memory = conf.get("spark.executor.memory", "1g")
    cores = conf.get("spark.executor.cores", "all of a worker's")
    ui = os.environ.get(MASTER_UI_VAR)
    state = master_state(ui) if ui else None
    cause = (
        cluster_holders(state, app_name)
        if state is not None
        else "every worker's cores or memory are taken by other applications, or no worker offers what it asks"
    )
    return (
        f"no Spark executor accepted {app_name} within {waited_s:.0f} s on {spark.sparkContext.master}: {cause}; "
        f"it asks for executors of {memory} and {cores} cores. Lower the stage's spark.resources, cap the other "
        f"applications (spark.cores.max) or add workers; nothing was committed, a retry runs the stage again "
        f"({WAIT_VAR} sets the bound)"
    )


def watch_executors(
    spark: SparkSession, app_name: str, on_timeout: Callable[[str], None] | None = None
) -> threading.Thread | None:
    """Start the watchdog for a driver on a cluster; None for local masters or a bound of 0.

    ``on_timeout`` gets the cause before the process ends (the stage entry reports it as its failure).
    """
    master = spark.sparkContext.master or ""
    limit = wait_seconds()
    if master.startswith("local") or limit <= 0:
        return None

    def watch() -> None:
        start = time.monotonic()
        while time.monotonic() - start < limit:
            try:
                if executor_count(spark) > 0:
                    return
            except Exception:  # any failure to ask (Py4J, a stopped context) means the stage is over
                return
            time.sleep(min(2.0, limit / 10))
        message = f"stage failed: {timeout_message(spark, app_name, time.monotonic() - start)}"
        if log.hasHandlers():  # the stage entry point's logging (the task log shows it)
            log.error("%s", message)
            logging.shutdown()
        else:
            print(message, file=sys.stderr)
        if on_timeout is not None:
            with contextlib.suppress(Exception):  # the process ends next: nothing the callback raises may stop that
                on_timeout(message.removeprefix("stage failed: "))
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(1)  # spark-submit's JVM relays this process's output from a thread of its own
        # the main thread is blocked inside a Spark job that will never start: end the process
        os._exit(EXIT_CODE)

    thread = threading.Thread(target=watch, name="dagspec-executor-wait", daemon=True)
    thread.start()
    return thread
