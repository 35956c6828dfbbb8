"""Train time, peak memory and CPU load of a training step, as the Criteo benchmark reports them.

The training may run in this process (single-node XGBoost) or in Spark's Python workers and the
JVM (Spark modes), so the monitor samples the whole local process tree: this process, the JVM it
talks to (its parent under spark-submit, a child under an in-process session) and every
descendant. ``cpu_load`` is CPU seconds of that tree over wall seconds (2.0 = two cores busy);
``peak_memory_mb`` the largest RSS sum seen (sampled every 0.2 s, and never below this process's
own peak RSS growth). On a cluster only the driver's host is seen; the numbers say so.
"""

from __future__ import annotations

import os
import threading
import time
from types import TracebackType
from typing import Any

import psutil

from dagspec.processes import own_peak_rss_mb


def _tree() -> list[psutil.Process]:
    me = psutil.Process(os.getpid())
    roots = [me]
    parent = me.parent()
    if parent is not None and "java" in (parent.name() or "").lower():
        roots.append(parent)
    seen: dict[int, psutil.Process] = {}
    for root in roots:
        seen[root.pid] = root
        try:
            for child in root.children(recursive=True):
                seen[child.pid] = child
        except psutil.Error:
            pass
    return list(seen.values())


def _cpu_and_rss(procs: list[psutil.Process]) -> tuple[float, float]:
    cpu = rss = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            cpu += times.user + times.system
            rss += proc.memory_info().rss
        except psutil.Error:
            pass
    return cpu, rss


class ResourceMonitor:
    """``with ResourceMonitor() as m: ...`` then ``m.summary()``."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._peak_rss = 0.0
        self._cpu_by_pid: dict[int, float] = {}
        self._cpu_start: dict[int, float] = {}
        self._started = False
        self.wall_s = 0.0

    def _sample(self) -> None:
        procs = _tree()
        _, rss = _cpu_and_rss(procs)
        self._peak_rss = max(self._peak_rss, rss)
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            # processes that exit between samples keep their last reading
            self._cpu_by_pid[proc.pid] = times.user + times.system
            # a process already running at the start counts from its reading then, a new one from 0
            self._cpu_start.setdefault(proc.pid, 0.0 if self._started else self._cpu_by_pid[proc.pid])

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> ResourceMonitor:
        self._sample()
        self._started = True
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="resource-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.wall_s = time.perf_counter() - self._t0
        self._stop.set()
        self._thread.join()
        self._sample()

    def summary(self) -> dict[str, Any]:
        """train_time_s, peak_memory_mb, cpu_load (and what was measured)."""
        cpu = sum(self._cpu_by_pid[p] - self._cpu_start.get(p, 0.0) for p in self._cpu_by_pid)
        own_peak = own_peak_rss_mb()
        return {
            "train_time_s": round(self.wall_s, 3),
            "peak_memory_mb": round(max(self._peak_rss / 2**20, own_peak), 1),
            "cpu_load": round(cpu / self.wall_s, 3) if self.wall_s > 0 else 0.0,
            "resource_scope": f"local process tree (driver, JVM, Python workers), sampled every {self.interval_s} s",
        }
