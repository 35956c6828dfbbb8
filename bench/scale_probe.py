"""What ``bench/scale.py`` measures around a ``dagspec run``: processes, Spark task metrics, manifests.

- :class:`ProcessSampler` reads ``/proc`` every ``interval`` seconds in a thread: every process
  descending from the given root pids (the ``dagspec run`` command; the Spark Connect server, found
  by its port) with its role, RSS and CPU ticks. A stage's peak RSS per role and CPU seconds are
  then taken over the samples inside the stage's own time window (its manifest's ``started`` to
  ``finished``; ``dagspec run`` runs the tasks one after another, so windows do not overlap).
- :func:`spark_task_metrics` sums shuffle and spill bytes of the Spark tasks that finished in a
  window, from the event logs of every Spark application of the run (the Connect server and the
  spark-submit drivers; written when ``spark.eventLog.enabled`` is set through ``SPARK_CONF_DIR``).
- :func:`stage_manifests` reads the committed manifests of a storage root.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
ROLES = ("client", "driver_jvm", "connect_server", "python_worker", "executor", "airflow", "other")


def role_of(cmdline: str) -> str:
    """The part a process plays in a run, from its command line."""
    if "SparkConnectServer" in cmdline:
        return "connect_server"
    if "CoarseGrainedExecutorBackend" in cmdline:
        return "executor"
    if "java" in cmdline.split(" ", 1)[0] and "SparkSubmit" in cmdline:
        return "driver_jvm"  # a spark-submit stage's driver JVM
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline or "pyspark/daemon" in cmdline:
        return "python_worker"
    if "run_stage.py" in cmdline:
        return "client"  # a Connect client, or a spark-submit stage's Python driver
    if "airflow" in cmdline or "dagspec" in cmdline:
        return "airflow"  # `dagspec run` and the `airflow dags test` process that runs the tasks
    return "other"


@dataclass
class _Proc:
    role: str
    start: float  # sample time first seen
    cpu0: float  # CPU seconds when first seen (0 when it started after sampling began)


@dataclass
class ProcessSampler:
    """Samples the process trees under ``roots()`` (called at every sample) until :meth:`stop`."""

    roots: Any  # Callable[[], set[int]]
    interval: float = 0.5
    samples: list[tuple[float, dict[tuple[int, int], tuple[str, int, int, float]]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _roles: dict[tuple[int, int], str] = field(default_factory=dict)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self._sample()))
            self._stop.wait(self.interval)

    def _sample(self) -> dict[tuple[int, int], tuple[str, int, int, float]]:
        """``{(pid, start ticks): (role, rss kB, peak rss kB, cpu s)}`` of every process under the roots."""
        stats: dict[int, list[str]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    text = Path(f"/proc/{entry.name}/stat").read_text()
                except OSError:
                    continue
                stats[int(entry.name)] = text[text.rindex(")") + 2 :].split()
        children: dict[int, list[int]] = defaultdict(list)
        for pid, fields in stats.items():
            children[int(fields[1])].append(pid)
        todo, seen = [p for p in self.roots() if p in stats], set()
        while todo:
            pid = todo.pop()
            if pid not in seen:
                seen.add(pid)
                todo.extend(children.get(pid, []))
        out = {}
        for pid in seen:
            fields = stats[pid]
            key = (pid, int(fields[19]))
            if key not in self._roles:
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                self._roles[key] = role_of(cmd)
            cpu = (int(fields[11]) + int(fields[12])) / TICKS
            out[key] = (self._roles[key], *_rss_hwm_kb(pid, int(fields[21]) * PAGE_KB), cpu)
        return out

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Over ``[start, end]`` (epoch s): CPU seconds of all processes (by role, from the last sample
        before the window to the first after it), peak RSS (MB) of one process and of all processes
        per role (samples inside the window), and the processes seen."""
        before: dict[tuple[int, int], float] = {}
        last: dict[tuple[int, int], tuple[str, float]] = {}
        peak_one: dict[str, float] = defaultdict(float)
        peak_hwm: dict[str, float] = defaultdict(float)
        peak_sum: dict[str, float] = defaultdict(float)
        born: dict[tuple[int, int], bool] = {}
        for t, procs in self.samples:
            if t < start:
                before = {k: v[3] for k, v in procs.items()}
                continue
            if t > end:
                # CPU up to the first sample after the window: a window shorter than the sampling
                # interval still counts the CPU spent in it (and up to one interval more)
                for key, (role, _rss, _hwm, cpu) in procs.items():
                    if key in last or key in before:
                        last[key] = (role, cpu)
                break
            sums: dict[str, float] = defaultdict(float)
            for key, (role, rss_kb, hwm_kb, cpu) in procs.items():
                last[key] = (role, cpu)
                peak_one[role] = max(peak_one[role], rss_kb / 1024)
                # a process's lifetime peak (VmHWM) counts when it was born in the window (a
                # long-lived server's may come from an earlier stage), or is a stage's client (one
                # per stage; started one stage ahead, it only imported before its own stage)
                born.setdefault(key, key not in before)
                if born[key] or role == "client":
                    peak_hwm[role] = max(peak_hwm[role], hwm_kb / 1024)
                sums[role] += rss_kb / 1024
            for role, total in sums.items():
                peak_sum[role] = max(peak_sum[role], total)
        cpu_by_role: dict[str, float] = defaultdict(float)
        for key, (role, cpu) in last.items():
            cpu_by_role[role] += cpu - before.get(key, 0.0)
        return {
            "cpu_s": round(sum(cpu_by_role.values()), 2),
            "cpu_s_by_role": {r: round(v, 2) for r, v in sorted(cpu_by_role.items())},
            "peak_rss_mb": {r: round(v, 1) for r, v in sorted(peak_one.items())},
            "peak_rss_sum_mb": {r: round(v, 1) for r, v in sorted(peak_sum.items())},
            "peak_hwm_mb": {r: round(v, 1) for r, v in sorted(peak_hwm.items())},
            "processes": len(last),
        }


def _rss_hwm_kb(pid: int, fallback_kb: int) -> tuple[int, int]:
    """Current and peak RSS (VmRSS, VmHWM: the peak of this process image, exact between samples)."""
    rss = hwm = fallback_kb
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, max(hwm, rss)


def _pids_whose_command(matches: Callable[[str], bool]) -> set[int]:
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith(("java", "/")) and matches(cmd):
                found.add(int(entry.name))
    return found


def connect_server_pids(port: int) -> set[int]:
    """The Spark Connect server JVM(s) listening on ``port`` (by their command line)."""
    needle = f"spark.connect.grpc.binding.port={port}"
    return _pids_whose_command(lambda cmd: "SparkConnectServer" in cmd and needle in cmd)


def executor_pids() -> set[int]:
    """Standalone executors on this machine (``dagspec cluster up`` starts them under its workers, outside
    the run's process tree): with ``--master spark://`` their CPU and memory are the run's."""
    return _pids_whose_command(lambda cmd: "CoarseGrainedExecutorBackend" in cmd)


def _task_ends(events_dir: Path) -> list[dict[str, Any]]:
    """Per finished Spark task: finish time (epoch s) and its shuffle, spill and CPU metrics."""
    tasks = []
    for path in sorted(p for p in events_dir.rglob("*") if p.is_file()):
        with path.open(errors="replace") as lines:
            for line in lines:
                if '"SparkListenerTaskEnd"' not in line[:60]:
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line of a log still being written
                metrics = event.get("Task Metrics") or {}
                read = metrics.get("Shuffle Read Metrics") or {}
                write = metrics.get("Shuffle Write Metrics") or {}
                tasks.append(
                    {
                        "finish": event["Task Info"]["Finish Time"] / 1000,
                        "shuffle_read_bytes": read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0),
                        "shuffle_write_bytes": write.get("Shuffle Bytes Written", 0),
                        "memory_spill_bytes": metrics.get("Memory Bytes Spilled", 0),
                        "disk_spill_bytes": metrics.get("Disk Bytes Spilled", 0),
                        "executor_cpu_s": metrics.get("Executor CPU Time", 0) / 1e9,
                    }
                )
    return tasks


def spark_task_metrics(events_dir: Path, windows: dict[str, tuple[float, float]]) -> dict[str, dict[str, Any]]:
    """Per stage name: the summed metrics of the Spark tasks that finished inside its window."""
    tasks = _task_ends(events_dir) if events_dir.is_dir() else []
    out: dict[str, dict[str, Any]] = {}
    for name, (start, end) in windows.items():
        inside = [t for t in tasks if start <= t["finish"] <= end]
        sums = {k: sum(t[k] for t in inside) for k in tasks[0] if k != "finish"} if tasks else {}
        out[name] = {"spark_tasks": len(inside), **{k: round(v, 2) for k, v in sums.items()}}
    return out


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def stage_manifests(storage: Path) -> dict[str, dict[str, Any]]:
    """The newest committed manifest of every stage under ``storage`` (one pipeline's root)."""
    found: dict[str, dict[str, Any]] = {}
    for path in storage.rglob("manifest.json"):
        if not (path.parent / "_SUCCESS").exists():
            continue
        manifest = json.loads(path.read_text())
        name = manifest.get("stage")
        if name and (name not in found or manifest["started"] > found[name]["started"]):
            manifest["window"] = (_epoch(manifest["started"]), _epoch(manifest["finished"]))
            found[name] = manifest
    return found


def stage_rows(manifests: dict[str, dict[str, Any]], name: str) -> int | None:
    """The rows a stage handles: the larger of its tables' rows and its input tables' rows."""
    manifest = manifests[name]
    counts = list(manifest.get("rows", {}).values())
    metric_rows = (manifest.get("metrics") or {}).get("rows")
    if isinstance(metric_rows, int):
        counts.append(metric_rows)
    for source in (manifest.get("inputs") or {}).values():
        upstream = manifests.get(source.get("stage") or "")
        if upstream:
            counts.append(upstream.get("rows", {}).get(source.get("output"), 0))
    return max(counts) if counts else None
